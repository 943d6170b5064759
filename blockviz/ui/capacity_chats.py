"""The trace tab's per-chat view (a Qwen-Bailian trace, sequence mode): replay the trace at the
curve marker's pool size in a worker (:func:`blockviz.sim.chats.chat_report`: each request's hits
there and with an infinite cache), then show one conversation's turns, what each hit and what
evictions cost it. State (this session only): the last result, the job computing one."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from blockviz.i18n import t
from blockviz.render.chats import chat_lines, chat_option, turn_figure
from blockviz.render.theme import heading_html
from blockviz.sim.chats import chat_report
from blockviz.ui import capacity_curve, jobs
from blockviz.ui import state as session
from blockviz.ui.nav import md_escape

W_CHAT = "w_capt_chat"


@dataclass(frozen=True)
class ChatTrace:
    """A Bailian trace's conversations at one pool size and free order, in a worker."""
    path: str
    name: str
    block_size: int
    limit: int                   # the first requests of the trace replayed
    pool_blocks: int
    free_order: str

    def __call__(self, report) -> dict:
        def progress(done: int, total: int) -> None:
            report(done=done, total=total, runs=2)
        return chat_report(self.path, name=self.name, block_size=self.block_size, limit=self.limit,
                           requests=self.limit, pool_blocks=self.pool_blocks, free_order=self.free_order,
                           progress=progress)


def box(trace, sweep, lang: str) -> None:
    """The section: a button replaying at the marker's pool size, its progress, the chat shown."""
    ss = st.session_state
    st.html(heading_html(t("chat_title", lang)))
    st.caption(t("chat_intro", lang))
    pool = int(ss.get(capacity_curve.W_POOL) or 1)
    order = ss.get("w_capt_order") or "split"
    task = ChatTrace(trace.path, trace.name, sweep.task.block_size, sweep.task.limit, pool, order)
    if st.button(t("chat_run", lang, pool=f"{pool:,}", order=t(f"cap_order_{order}", lang)),
                 key="b_capt_chats", icon=":material/forum:"):
        jobs.start(session.CAPT_CHAT_JOB, task, trace.name, lang)
    jobs.follow(session.CAPT_CHAT_JOB, lang, lambda state, task, lang: _took(state, task, trace, lang))
    shown = ss.get(session.CAPT_CHATS)
    if shown is None or shown[0] != trace.key or shown[1].block_size != sweep.task.block_size:
        return
    _, done, r = shown
    if (done.pool_blocks, done.free_order) != (pool, order):
        st.caption(t("chat_stale", lang, pool=f"{done.pool_blocks:,}", now=f"{pool:,}",
                     order=t(f"cap_order_{done.free_order}", lang)))
    if not r["chats"]:
        st.info(t("chat_none", lang))
        st.markdown(f"- {md_escape(chat_lines(r, None, lang)[0])}")
        return
    chats = r["chats"]
    if not isinstance(ss.get(W_CHAT), int) or not 0 <= ss[W_CHAT] < len(chats):
        ss[W_CHAT] = 0
    k = st.selectbox(t("chat_pick", lang), range(len(chats)), key=W_CHAT,
                     format_func=lambda i: chat_option(chats[i], lang), help=t("chat_pick_help", lang))
    chat = chats[int(k)]
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.plotly_chart(turn_figure(chat, lang), key="capt_chat_chart", config={"displayModeBar": False})
    with right:
        st.markdown("\n".join(f"- {md_escape(line)}" for line in chat_lines(r, chat, lang)))


def _took(state, task: ChatTrace, trace, lang: str) -> None:
    ss = st.session_state
    if state.status == "done":
        ss[session.CAPT_CHATS] = (trace.key, task, state.result)
        ss[W_CHAT] = 0
        st.progress(1.0, text=t("chat_done", lang, requests=f"{state.result['requests']:,}",
                                pool=f"{task.pool_blocks:,}", s=f"{state.seconds:.1f}"))
        return
    cmd = (f"blockviz trace capacity {trace.name} --block-size {task.block_size} --limit {task.limit} "
           f"--free-order {task.free_order} --pool-blocks {task.pool_blocks}")
    ss[jobs.message_key(session.CAPT_CHAT_JOB)] = jobs.stopped_message(state, lang,
                                                                      {"what": trace.name, "cmd": cmd})
