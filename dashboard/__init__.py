"""Streamlit dashboard (pages only render; data access goes through one module)."""
