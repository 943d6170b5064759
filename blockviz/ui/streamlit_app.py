"""The script ``blockviz app`` hands to ``streamlit run`` (an installed copy has no app.py)."""
from blockviz.ui.main import main

main()
