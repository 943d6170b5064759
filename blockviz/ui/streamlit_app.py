"""The script ``blockviz app`` hands to ``streamlit run`` (an installed copy has no app.py).
(Streamlit runs it as ``__main__``; a worker process imports it as ``__mp_main__`` and must not
start the app.)"""
from blockviz.ui.main import main

if __name__ == "__main__":
    main()
