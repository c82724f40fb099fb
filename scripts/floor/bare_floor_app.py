"""The floor for browser timings: a bare Streamlit page with one 12x12 Altair heatmap (numbers in the cells) and
three bar charts, redrawn for a new seed. Measure it in the same run as the app's pages and report the ratio:
    streamlit run scripts/floor/bare_floor_app.py --server.port 8599 --server.headless true
(about 165 ms from pressing "+" on the seed to the last chart redrawn, headless Chromium, 2 cores)."""
import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

seed = st.number_input("seed", 0, 10**6, 0)
n = 12
rng = np.random.default_rng(seed)
w = rng.random((n, n))
w /= w.sum(1, keepdims=True)
toks = [f"t{i}" for i in range(n)]
df = pd.DataFrame([(toks[i], toks[j], w[i, j]) for i in range(n) for j in range(n)], columns=["q", "k", "w"])
base = alt.Chart(df).encode(x=alt.X("k:N", sort=toks), y=alt.Y("q:N", sort=toks))
heat = base.mark_rect().encode(color=alt.Color("w:Q", scale=alt.Scale(domain=[0, 1])))
st.altair_chart(heat + base.mark_text().encode(text=alt.Text("w:Q", format=".2f")))
for _ in range(3):
    st.altair_chart(alt.Chart(df).mark_bar().encode(x="k:N", y="w:Q"))
