"""blockviz — the Streamlit app: ``streamlit run app.py`` (or ``blockviz app``). The pages live in
blockviz/ui/; blockviz/ui/streamlit_app.py lists them. (Streamlit runs this file as ``__main__``; a worker
process imports it as ``__mp_main__`` and must not start the app.)"""
from blockviz.ui.streamlit_app import main

if __name__ == "__main__":
    main()
