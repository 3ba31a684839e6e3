"""What comes into the store: candidates from spectra and catalogues (`ingest`), and labels
from earlier visual-inspection campaigns (`labels`, `launch.py import-labels`)."""
