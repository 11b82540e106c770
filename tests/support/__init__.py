"""What the tests share: the repository's paths, and (in time) one fake apiserver."""
