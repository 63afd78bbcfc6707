"""The dashboard's pages (Streamlit scripts run by :mod:`dashboard.app`); they only render."""
