"""Streamlit pages and per-session state: the only package (with app.py) that calls ``st.*``."""
