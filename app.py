"""blockviz — the Streamlit app: ``streamlit run app.py`` (or ``blockviz app``). The pages live in
blockviz/ui/; blockviz/ui/main.py lists them."""
from blockviz.ui.main import main

main()
