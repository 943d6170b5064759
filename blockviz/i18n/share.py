"""The words of sharing and the editor (issue 15): the share-link and embed boxes on the Author
page, what the player says about a link it cannot open or a run cut short, and the editor's own
labels (blockviz/ui/editor.py)."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
    # the Author page's share box
    "share_title": ("Share", "分享"),
    "share_link": ("Link to this scenario (opens the player on it; nothing is stored on the server)",
                   "这个场景的链接（在播放器中打开它；服务器上不保存任何东西）"),
    "share_help": ("The whole scenario is compressed into the link itself, so the link works as long "
                   "as the app does, on any server, after a restart too. step= and lang= in it choose "
                   "where it opens.",
                   "整个场景被压缩在链接本身里，所以只要有这个应用，链接在任何服务器上、重启之后都能打开。"
                   "链接里的 step= 和 lang= 决定它打开在哪一步、用哪种语言。"),
    "share_embed": ("Embed it in a course page (an <iframe>)", "嵌入课程网页（<iframe>）"),
    "share_size": ("{n:,} of {limit:,} characters.", "{n:,} / {limit:,} 个字符。"),
    "share_invalid": ("The link appears once the scenario is valid.", "场景合法后这里会出现链接。"),
    "share_too_long": ("This scenario does not fit in a link: the link would be {n:,} characters, and a "
                       "link holds at most {limit:,} (about 8 KB). Download the file (“Download .yaml”) "
                       "and send it instead, or make the scenario shorter (fewer steps or notes).",
                       "这个场景放不进链接：链接会有 {n:,} 个字符，而链接最多 {limit:,} 个字符（约 8 KB）。"
                       "请下载文件（“下载 .yaml”）发给别人，或者把场景写短一些（少一些步骤或说明）。"),
    # the player, opening a link
    "link_refused": ("The shared link could not be opened: {msg_en}. Showing “{d}” instead.",
                     "无法打开这个分享链接：{msg_zh}。改为显示 “{d}”。"),
    "link_opened_note": ("Opened from a shared link: the link in the address bar reopens this scenario "
                         "at this step.",
                         "这是从分享链接打开的：地址栏里的链接可以在这一步重新打开这个场景。"),
    # a run cut short (a time or size limit, or an event the state does not allow)
    "cut_short": ("This run stopped early, at step {k} of the scenario's {n} steps: {why_en}. The player "
                  "shows only the steps that ran (0 to {last}).",
                  "这次运行提前停止了，停在第 {k} 步（场景共 {n} 步）：{why_zh}。播放器只显示运行过的步骤"
                  "（0 到 {last}）。"),
    "cut_short_cli": ("To run it whole, download it (the Author page saves it as {file}) and run: "
                      "python -m blockviz play {file}",
                      "完整运行：先下载它（编写页面保存为 {file}），再运行：python -m blockviz play {file}"),
    # the editor (blockviz/ui/editor.py)
    "ed_checking": ("checking…", "检查中…"),
    "ed_ok": ("no errors", "没有错误"),
    "ed_line": ("line {line}", "第 {line} 行"),
    "ed_complete_hint": ("Ctrl+Space: complete an event or field name", "Ctrl+Space：补全事件名或字段名"),
    "ed_browser_note": ("quick check in the browser", "浏览器里的快速检查"),
    "num_blocks_hint": ("config.num_blocks is at most {limit:,} (the usable GPU blocks; block 0, the "
                        "null block, is added). Use a smaller number: a lesson needs a few blocks, a "
                        "capacity study a few thousand.",
                        "config.num_blocks 最大为 {limit:,}（可用的 GPU 块数；0 号 null 块会另外加上）。"
                        "请用小一些的数："
                        "一节课只需要几个块，容量研究也只需要几千个。"),
    "block_size_hint": ("config.block_size is at most {limit:,} tokens per block (vLLM's usual sizes are "
                        "16 or 32). Use a smaller block size.",
                        "config.block_size 每块最多 {limit:,} 个 token（vLLM 常用 16 或 32）。"
                        "请用小一些的块大小。"),
}
STRINGS.update({
    # the editor's quick check in the browser (the loader's message replaces it a moment later)
    "ed_q_tab": ("a tab: YAML indents with spaces", "这里用了制表符：YAML 只能用空格缩进"),
    "ed_q_field": ("unknown field '{f}'", "未知字段 '{f}'"),
    "ed_q_event": ("unknown event '{e}'", "未知事件 '{e}'"),
    "ed_q_close": ("'{c}' closes nothing here", "这里的 '{c}' 没有对应的开括号"),
    "ed_q_open": ("not closed: a '{c}' is missing", "没有闭合：缺少 '{c}'"),
    "ed_q_quote": ("a quote is not closed", "引号没有闭合"),
})
