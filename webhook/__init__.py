"""infergate: admission webhook and offline CEL/schema validator for AI-inference APIs."""

__version__ = "0.1.0"
