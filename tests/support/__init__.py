"""What the tests share: the repository's paths, the fake apiserver, the shipped chain and state."""
