"""The spectrum simulator: class library, instrument model and the demo set."""
