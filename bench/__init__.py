"""blockviz benchmarks: ``python -m bench`` (see ``bench/__main__.py``).

  core     blockviz's BlockPool vs vLLM 0.33's own, replaying one recorded call trace
  scale    10,000 / 100,000-event scenarios on 16,384 blocks: run time, peak RSS, random jumps
  tensors  paged KV writes and gathers vs a contiguous copy of the same bytes
  app      a player rerun (a step, a jump) vs a bare Streamlit page with the same widgets
"""
