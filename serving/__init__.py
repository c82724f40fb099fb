"""The server's machinery, shared by every session: byte-budgeted caches, the training queue, admission of page
runs, the URL guard, the poll rooms' store, the Streamlit-compatibility notices and the preload of the pages'
modules. Apart from ``ui`` (what a learner sees) because it holds the process's shared state and its rules; it
draws nothing itself beyond the router's notices and imports from ``ui`` only leaf modules (messages, formats,
the page registry)."""
