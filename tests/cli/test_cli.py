import subprocess
import sys


def test_help_lists_every_command():
    from webhook.cli import COMMANDS

    out = subprocess.run([sys.executable, "-m", "webhook", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for name in COMMANDS:
        assert name in out.stdout


def test_unknown_command_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "webhook", "frobnicate"], capture_output=True, text=True)
    assert out.returncode == 2
