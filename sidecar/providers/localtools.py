"""Tool use a 0.5B model can do: a constrained decision, then constrained arguments (the ``local`` provider).

Offered the full tool declarations in its chat template, the embedded model mostly answers from memory, and the
calls it does write are free text (issue 24: task success 0.30 on agent-core-v1). Here the choice is made in two
constrained generations over one compact prompt (the model's own chat template; the tools one line each: name,
argument signature, the description's first sentence; not the agent's system prompt, which the 0.5B model read
as a reason to call the first tool listed, and which doubled the prompt to ~530 tokens). The tools are listed in
the order of their similarity to the request (and the latest tool result, :func:`query_text`), a tool retriever
as a prior: the model favours the first tool listed, and that is then the likeliest one:

1. **decision** — the reply starts ``{"tool": "`` (:data:`DECISION_PREFIX`, written into the prompt) and the model
   goes on with ``answer`` or one of the offered tools, then ``"`` (a regular expression the runtime enforces token
   by token, :func:`choice_regex`), so the model always chooses, and can only choose an offered tool; the runtime
   reports the model's own log-probability of the name (its ``score``);
2. **arguments** — for a tool, the reply goes on with ``, "arguments": `` and the runtime constrains the rest to
   the tool's parameter schema (:func:`arguments_schema`): the call is valid JSON of the right shape; this step's
   prompt shows the chosen tool in full instead of the list (:func:`arguments_prompt`);
3. for ``answer``, the answer is generated as plain text (streamed) without the tools in the prompt; after tool
   results, from the question with the results folded in.

Tool results are shown to the next decision (so a search can be followed by a write) folded into the request as a
"Done so far" list (:func:`decision_history`), up to :data:`MAX_CALLS_PER_TURN` calls per user turn. Every tool
stays offered; naming one whose call already succeeded in the turn means the answer is written from the results
(:func:`succeeded`), and after a result another tool is called only when the model is :func:`confident` of it, else
the answer is written; a call identical to one already made in the turn (a failed one, retried as it was) is never
emitted again (:func:`repeated`): the answer is asked for instead. Pure functions: no model, no I/O.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from decimal import Decimal
from typing import Any, TypeGuard

from ..ir import MetonaMessage, MetonaToolDef
from ..localmodel import jsongrammar
from .base import tool_text

ANSWER = "answer"
"""The decision that no tool is needed (never a tool's name: an offered tool of that name is not offered)."""
MAX_CALLS_PER_TURN = 4
"""Tool calls after the last user message beyond which the model is asked for the answer without a decision."""
ARGUMENT_TOKENS = 4096
"""Most tokens of one call's arguments, a file's content included (the worker also stops at the context window).
It was 384: a longer file was cut and the call dropped without a word. A looping argument is ended long before by
the worker's loop guard (``stop_on_loop``); arguments cut either way are reported to the user (:func:`cut_notice`)."""
GUIDANCE = (
    "Call a tool when the request needs what one of the tools above does (its description says what): something "
    "you cannot know or do reliably yourself. Otherwise answer directly."
)
"""The decision's rule, from the offered tools themselves (a plugin's tool is served as a built-in one). It named
the built-in kinds before ("the user's own notes, files or folders, the current date or time, exact arithmetic,
or changing a file"), so anything else looked like a question to answer from memory. Measured together with the
router's paraphrases removed (scripts/bench/bench_tool_decision.py, 2026-12-03, load 3-6 on 2 cores): 34/40 +
34/36 → 35/40 + 35/36 (fixed: "Which file mentions PostgreSQL?", "What is the capital of France?", a held-out
search; broken: "Compute 19 * 23 and save the result to answer.txt" now writes first)."""
FORMAT = (
    'Reply with {"tool": <name>, "arguments": <JSON object>} to call one tool, or {"tool": "answer"} to answer '
    "directly."
)
QUERY_CHARS = 1000
"""Most characters of the request, and of the latest tool result, that the tool ranking embeds."""
DONE_SO_FAR = "Done so far:"
RESULT_INDENT = "    "
"""A result's further lines, in the prompt the answer is written from (:func:`done_lines`), are indented under its
``- tool(…) returned:`` item, so that a listing's or a search's entries read as the result's own and not as text
of the request's. Unindented, the 1.5B model answered a listing by its count ("学习资料文件夹里有4个文件。") or
named one file of two; on 24 results written for this (listings, searches, reads, a sum, the time, the notes;
2026-12-05, f32), the answers held every expected fact in 17 unindented, 21 indented (the question asked again
after the results: 19; the results before the question: 17)."""
DECISION_PREFIX = '{"tool": "'
"""The start of the decision's reply, written into the prompt (the model goes on with the name): what the model
generates is then only the name, and its score is the model's confidence in that name."""
NEXT_TOOL_MIN_P = 0.3
"""After a tool result of the turn, another tool is called only when the model gives its name at least this
probability (:func:`confident`), else the answer is written. Without it the 0.5B model, told what was done and
offered the tools not yet called, named a further tool after single-tool requests too ("What files are in the
reports folder?" → list_directory, then read_file at p≈0.2); the next steps of chains came at p≥0.4. Tried and
dropped (2026-12-04): a further look-up (a tool needing no permission that does not calculate) only at p ≥ 0.8 —
"Which of my files mention Project Falcon?" went on from the search's answer to list, read and search the notes —
took agent-bilingual-v1 (tuned on) from 0.75 to 0.77 and the held-out agent-bilingual-v2 from 0.60 to 0.56.

The tools whose calls succeeded stay in the list (since 485bc96, 2026-12-04): after a result the 0.5B model names
the tool it has just called (p 0.9–0.99 after a search, a listing, a read, a sum, a notes search), and taken out of
the list, that wish went to the nearest other tool — the notes search at p 0.90 after a file search, a file search
at p 0.44 after a listing, and the search's five-step chain above. Naming a tool that succeeded is now the answer
(:func:`succeeded`): of 16 decisions after a result in requests written for this, 10 → 12 right, agent-core-v1's
and the held-out fixture's 16 of 17 unchanged. The real second steps it still misses (a sum after reading a file:
the tool it had called at p 0.97, the calculator at p 0.07 without it); deciding on the request's later clause
alone was tried and dropped (it named a tool for "I need the date." and "我想找海边的照片。" too)."""
OPTIONAL_RULE = "Give an optional argument only when the request asks for something other than its default."
VALUE_RULE = (
    "Write each value in the form its description asks for: its format, its unit, its codes, as in its examples."
)
_STATED_ONLY = ("number",)
_KEEP = ("type", "enum", "const", "properties", "required", "items")
_REGEX_SPECIAL = frozenset("\\.^$*+?()[]{}|-/")


FILE_EXTENSIONS = frozenset(
    """md markdown txt text rst org adoc tex bib csv tsv json jsonl ndjson yaml yml toml ini cfg conf properties env
    log xml html htm css scss sass less js mjs cjs ts tsx jsx vue svelte py pyi ipynb rb go rs java kt kts scala c h
    cc cpp cxx hpp cs swift m mm php pl lua r dart sh bash zsh fish ps1 bat cmd sql graphql proto gradle lock diff
    patch pdf doc docx odt rtf xls xlsx ods ppt pptx odp epub png jpg jpeg gif svg webp bmp ico tif tiff heic mp3 wav
    flac ogg m4a aac mp4 mov avi mkv webm zip tar gz tgz bz2 xz 7z rar whl jar apk dmg iso db sqlite sqlite3 parquet
    srt vtt ics eml pem crt""".split()
)
"""Extensions that make a bare word a file name (``notes.md``, ``会议纪要.md``). Not web domains' endings
(``example.com``, ``.io``, ``.ai``): a word with another ending is a file only when quoted, given a folder, or seen
in the conversation's tool results (:func:`named_paths`)."""
FILE_NAMES = frozenset(
    """Makefile makefile GNUmakefile Dockerfile Containerfile Jenkinsfile Vagrantfile Procfile Gemfile Rakefile
    Pipfile Brewfile Justfile Caddyfile Podfile Snakefile Tiltfile Earthfile README LICENSE LICENCE COPYING
    CHANGELOG ChangeLog CONTRIBUTING AUTHORS CONTRIBUTORS MAINTAINERS CODEOWNERS NOTICE INSTALL""".split()
)
"""Conventional file names without an extension (the GNU coding standards' AUTHORS, INSTALL, ChangeLog too)."""
DOT_NAMES = frozenset((".env",))
"""Conventional file names that are also an extension after the dot: a word like ``.csv`` or ``.md`` alone is the
kind of file a request is about ("找出所有的 .csv 文件"), not a file's name."""
_QUOTED = re.compile(r"`([^`\n]{1,255})`|\"([^\"\n]{1,255})\"|'([^'\n]{1,255})'|“([^”\n]{1,255})”|‘([^’\n]{1,255})’"
                     r"|「([^」\n]{1,255})」|『([^』\n]{1,255})』|《([^》\n]{1,255})》")  # fmt: skip
_PATH_TOKEN = re.compile(r"(?:(?<![A-Za-z])[A-Za-z]:(?=[\\/]))?[\w./\\~-]+")  # D:\照片\海边.png: its drive too
_EXTENSION = re.compile(r"[^\s./\\]\.([A-Za-z][A-Za-z0-9]{0,7})$")
_LIBRARY = re.compile(r"[A-Z][a-z0-9]*\.js")  # Node.js, Vue.js, D3.js: a library's name by the .js convention
_DOTFILE = re.compile(r"\.[A-Za-z][\w.-]*")  # .env, .gitignore
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_GLUED_END = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}(?=[\u3400-\u9fff\uf900-\ufaff])")  # 会议纪要.md的内容
ZH_BEFORE_NAME = (
    "保存到", "保存为", "保存在", "写入", "写到", "写进", "存到", "存入", "存为", "存成", "另存为", "追加到", "添加到",
    "读取", "打开", "查看", "创建", "新建", "删除", "文件", "名为", "叫做", "到", "入", "进", "为", "把", "将", "在",
    "从", "和", "与", "及",
)  # fmt: skip
"""Words after which an unquoted Chinese file name glued to the text before it starts ("写入会议纪要.md" →
``会议纪要.md``); the last one in the word wins. A name that itself holds one of them is taken whole when quoted
(“读书笔记.md”), set apart by a space, or seen in the conversation's tool results."""
PATH_ARGUMENT = "path"
"""The argument that names the file a tool with side effects works on (:func:`names_its_file`)."""
PATH_KEYS = ("path", "file")
"""Keys of a tool result whose string values are files the conversation has seen (list_directory's entries)."""


def _is_file_name(name: str, *, quoted: bool = False) -> bool:
    """``name`` (one word, or a quoted span) names a file: it has a known extension (any extension, or a folder,
    when quoted) or is a conventional name without one; not a URL, a number or a library's ``X.js`` name."""
    if not name or "//" in name or "://" in name or name.endswith(("/", "\\")):
        return False
    parts = re.split(r"[/\\]", name)
    base = parts[-1]
    host = _EXTENSION.search(parts[0]) if len(parts) > 1 else None
    if not quoted and host is not None and host.group(1).lower() not in FILE_EXTENSIONS:
        return False  # example.com/page.html: a web address
    dotfile = _DOTFILE.fullmatch(base) is not None
    if dotfile and base[1:].lower() in FILE_EXTENSIONS and base not in DOT_NAMES:
        return base != name  # "all the .csv files": an extension; a folder's own file (data/.csv) is a name
    if base in FILE_NAMES or (dotfile and len(base) > 2):
        return True
    ext = _EXTENSION.search(base)
    if ext is None:
        return quoted and base != name and " " not in base  # a quoted path with folders: src/Makefile.local
    if quoted or base != name:
        return True
    return ext.group(1).lower() in FILE_EXTENSIONS and not _LIBRARY.fullmatch(base)


def _zh_start(word: str) -> str:
    """An unquoted word that glues a Chinese file name to the words before it, from after the last of
    :data:`ZH_BEFORE_NAME` (the word itself when there is none)."""
    stem = word.rsplit(".", 1)[0]
    if not _CJK.search(stem):
        return word
    cut = _after_lead_words(stem)
    return word[cut:] if cut < len(stem) else word


def _after_lead_words(text: str) -> int:
    """Where a name glued to the words before it starts in ``text``: after the last of :data:`ZH_BEFORE_NAME` (0
    when there is none)."""
    return max((text.rfind(w) + len(w) for w in ZH_BEFORE_NAME if w in text), default=0)


def _glued_pieces(token: str) -> list[str]:
    """A word cut after each extension that Chinese text follows without a space."""
    cuts = [0, *(m.end() for m in _GLUED_END.finditer(token)), len(token)]
    return [token[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def named_paths(text: str, known: Sequence[str] = ()) -> list[str]:
    """The file paths a request names, in order, each once. A name counts as a file when it is quoted or
    backticked and looks like a file (``"My Notes.md"``, `` `Makefile` ``), when it is one of ``known`` (files the
    conversation has seen, :func:`seen_files`: ``My Notes.md`` unquoted), or when it is a word (any script,
    folders allowed) with a known extension (``notes/todo.md``, ``会议纪要.md``) or a conventional name
    (``Makefile``, ``README``, ``.env``). Not: numbers (``3.5``), abbreviations (``e.g``), web addresses
    (``example.com``, ``https://…/page.html``), a library's ``X.js`` name (``Node.js``) unless quoted or known."""
    spans: list[tuple[int, int, str]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y, _ in spans)

    for match in _QUOTED.finditer(text):
        name = next(g for g in match.groups() if g is not None).strip()
        if _is_file_name(name, quoted=True) or name in known:
            spans.append((match.start(), match.end(), name))
    for match in _ZH_THIS_FILE.finditer(text):
        name = _zh_folder_name(match.group(1))
        if name and free(match.start(1), match.end(1)) and not _says_which(name) and not name.endswith(("/", "\\")):
            spans.append((match.start(1), match.end(1), name))
    for name in sorted({k for k in known if k}, key=len, reverse=True):
        for match in re.finditer(r"(?<![\w./\\])" + re.escape(name) + r"(?![\w/\\]|\.\w)", text):
            if free(match.start(), match.end()):
                spans.append((match.start(), match.end(), name))
    for match in _PATH_TOKEN.finditer(text):
        token = match.group().rstrip(".")
        if not token or not free(match.start(), match.start() + len(token)):
            continue
        before = text[max(match.start() - 3, 0) : match.start()]
        if before.endswith(("://", ":/", "@")):  # a web address's host, a mail address's domain
            continue
        at = 0
        for piece in _glued_pieces(token):  # "读取a.md和b.md" holds two names
            word = _zh_start(piece)
            if _is_file_name(word):
                start = match.start() + at
                if at == 0 and word == piece and (whole := _spaced_name(text, start, word)) != word:
                    spans = [s for s in spans if s[1] <= start - len(whole) + len(word) or s[0] >= start]
                    start, word = start - len(whole) + len(word), whole
                spans.append((start, match.start() + at + len(piece), word))
            at += len(piece)
    return list(dict.fromkeys(name for _, _, name in sorted(spans)))


_FOLDERED = re.compile(r"(?:^|(?<=\s))([\w.~-]*[\w~-][/\\](?:[\w.~-]+[/\\])*[\w.~-]*\w) $")
"""A word with folders (``reports/May``, ``旅行/东京``) just before a space: the start of a name with spaces."""
_CALLED = re.compile(
    r"\b(?:file|document|doc|note)s?\s+(?:called|named|titled)\s+((?:[^\s/\\,;:\"'“”‘’]+ ){1,3})$", re.IGNORECASE
)
"""Words between "a file called" (named, titled; a document, a note) and a file name: the start of the name ("a file
called tax estimate.txt"; not "the function named parse defined in utils.py")."""


_ZH_THIS_FILE = re.compile(
    r"(?:^(?![^\s这那]*?(?:我|你|帮|请|一下|看看|看下|打开))|(?<=\s)|(?<=[「“\"'‘]))"
    r"([^\s，。、；：？！,;:?!「」“”\"'‘’《》()（）]+?)[」”\"'’]?\s*(?:这个|那个)文件(?!夹)"
)
"""A Chinese request's "X 这个文件" (the file X), X set apart by a space or quoted, or starting the request (not
"帮我看看"): a file's name, an extension or not (a request to read "购物清单 这个文件" named no file before: the
folder was listed instead; agent-mine-v4, a tuning set; a name at the request's start was not read, agent-mine-v7,
another)."""


NAME_REACH = 1000
"""How far before an unquoted file name :func:`_spaced_name` looks for the words its path holds (characters)."""


def _spaced_name(text: str, start: int, name: str) -> str:
    """An unquoted file ``name`` at ``start`` of ``text`` with the words before it that its path holds: a word with
    folders before a space (``reports/May sales.csv``, ``旅行/东京 行程.md``; the folder named before the first
    space is cut as the read of it finds: ``Team Docs/May notes.md`` is read as ``Docs/May notes.md``, in the one
    folder ``Docs`` can mean), or the words after "a file called" (named, titled: ``a file called tax
    estimate.txt``). Cut at the space, the name was another file: ``sales.csv`` (two such files beside it),
    ``estimate.txt`` written instead of ``tax estimate.txt`` (agent-mine-v4, a tuning set)."""
    before = text[max(start - NAME_REACH, 0) : start]
    if start > NAME_REACH:  # from a word's start: a request holding a pasted page is read in linear time
        before = before[next((i + 1 for i, c in enumerate(before) if c.isspace()), len(before)) :]
    called = _CALLED.search(before)
    if called:
        return called.group(1) + name
    while (folders := _FOLDERED.search(before)) and not _is_file_name(folders.group(1)):
        word = folders.group(1)
        cut = _after_lead_words(word) if _CJK.search(word) else 0
        if not re.search(r"[/\\][^/\\]", word[cut:]):
            break  # "在src/目录下新建 main.py": the folder and the lead words, no name of its own
        name = f"{word[cut:]} {name}"
        if cut:
            break  # a Chinese lead word glued before it ("打开旅行/东京 行程.md"): the name starts after it
        before = before[: folders.start(1)]
    return name


def seen_files(messages: Sequence[MetonaMessage]) -> list[str]:
    """The files the conversation's tool results name (the string values of :data:`PATH_KEYS` anywhere in a
    result that look like a file, not a folder: list_directory's entries, search_files' matches), each with its
    base name."""
    out: dict[str, None] = {}

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key in PATH_KEYS and len(value) <= 255 and _is_file_name(value, quoted=True):
            out[value] = None
            out[re.split(r"[/\\]", value)[-1]] = None

    for m in messages:
        if m.role == "tool" and m.tool_result is not None:
            walk(m.tool_result.result)
    return [p for p in out if p]


def names_its_file(tool: MetonaToolDef) -> bool:
    """A tool that changes things (it needs the user's permission) on a file given by a required
    :data:`PATH_ARGUMENT` string: such a call is made only on a file the request names (:func:`grounded`)."""
    return tool.requires_permission and takes_a_file(tool)


_CHANGE_VERBS = frozenset(
    "write edit create move rename delete remove update set append put post patch insert upload save mkdir rm "
    "modify replace add commit reset checkout push merge stage init send clear apply copy make drop kill install "
    "overwrite truncate unlink buy purchase reserve pay cancel reschedule transfer submit sell publish".split()
)
"""Verbs in a tool's name that say it changes things (``write_file``, ``create_directory``, ``git_commit``,
``add_observations``, ``BuyMovieTickets``, ``MakePayment``); a name without one reads (``read_text_file``,
``get_file_info``, ``directory_tree``, ``FindMovies``). Nouns that are verbs too (order, book, schedule) are not
here: ``get_order_status`` reads."""


def _name_words(name: str) -> list[str]:
    """A tool's or an argument's name in lower-case words, split at ``_``, ``-`` and camelCase (``imagePath`` →
    image, path)."""
    return re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).replace("_", " ").replace("-", " ").lower().split()


def _said_of(key: str, spec: dict[str, Any]) -> str:
    """What an argument says of itself: its name's words (:func:`_name_words`) and its description, lower-case."""
    return f"{' '.join(_name_words(key))} {spec.get('description') or ''}".lower()


def _tool_words(name: str) -> list[str]:
    """A tool's name in lower-case words (:func:`_name_words`), split at ``.`` too (``git.commit``)."""
    return _name_words(name.replace(".", " "))


def changes_things(tool: MetonaToolDef) -> bool:
    """The tool's name holds a verb of :data:`_CHANGE_VERBS` (:func:`_tool_words`)."""
    return any(w in _CHANGE_VERBS for w in _tool_words(tool.name))


def may_change(tool: MetonaToolDef) -> bool:
    """The tool changes things by its name (:func:`changes_things`) or needs the user's permission to run."""
    return changes_things(tool) or tool.requires_permission


_HOW_TO_DO = re.compile(
    r"^\W*(?:how (?:do|can|could|should|would) (?:i|we|you|one)\b|how to\b)"
    r"|^(?:请问)?(?:我)?(?:该|要|应该)?(?:怎么|如何|怎样)(?!样)",
    re.IGNORECASE,
)


def asks_how_to(text: str) -> bool:
    """``text`` opens by asking how something is done ("How do I create an index in SQLite?", "how to delete a
    branch", "怎么删除分支？", "如何新建表？"): what to do is explained, not done — a tool whose name says it changes
    things (:func:`changes_things`) is not called for it. Offered a database plugin's ``create_table``, "How do I
    create an index in SQLite?" ran ``CREATE INDEX idx_name ON table_name (column1, column2, ...)`` (requests
    written for this, 2026-12-06); none of the tuning half's how-to requests that call a tool (5, single and real
    users') calls one whose name says so ("How to obtain the detailed case information of 'R vs Adams'?" →
    ``legal_case.fetch``: a plugin's tool, which needs permission, but one that reads)."""
    return _HOW_TO_DO.search(text.strip()) is not None


_DELETE_ASKED = re.compile(
    r"^\W*(?:(?:please|pls|ok|okay|just|go ahead and|can you|could you)\W+)*(?:delete|remove|destroy|erase|purge"
    r"|terminate|uninstall|wipe|nuke)\s+(?!(?:is|was|button|option|icon|key|menu|does|doesn'?t|isn'?t)\b)\w"
    r"|(?:把|将)[^，。,.!?？！]{0,30}?(?:删掉|删除|删了|销毁)|(?:帮我|请|直接|给我)[^，。,.!?？！的]{0,8}?(?:删掉|删除|销毁)"
    r"|(?:删掉|删除|销毁|删了)(?:吧|了|掉|它)?\W*$|(?:实例|ECS|服务器|机器|云盘|磁盘|弹性 ?IP|ip)[^。]{0,16}释放",
    re.IGNORECASE,
)
"""A command to delete: an English request that opens with the verb ("Delete contact 12345…"; not "Delete is
greyed out…", "Remove button does nothing"), a Chinese 把…删掉, 帮我…删除, …销毁, an instance 释放 (not 释放内存, a
port; not 卸载 a disk nor 注销 a login)."""
_NOT_A_DELETE = re.compile(
    r"删除的|删掉的|删了的|谁删|被删|已删|删除了|恢复|找回|回收站|(?:^|[，,。])\s*先|首先|然后|之后|接着|\bthen\b|\bafter\b"
    r"|\bwhy\b|为什么|怎么",
    re.IGNORECASE,
)
"""What makes a delete's words something else: what was deleted (删除的, 谁删除了, 恢复), a delete after another
step (先…然后), a question why."""
_DELETES = re.compile(
    r"\b(?:delet|remov|destroy|drop|eras|purg|terminat|uninstall|trash|discard|archiv|clean|prune|wipe|rm|revok|kick"
    r"|unassign|clear|cancel|detach|unlink|kill|unfollow|expir|deactivat|invalidat|close|closed|reset|unsubscrib|ban"
    r"|evict|releas|unstar|leave|void|flush|truncat)"
    r"|删|销毁|释放|卸载|清理|清空|注销|撤回|吊销|移出|取消",
    re.IGNORECASE,
)
"""What a tool that deletes may say, in its name, its description or its arguments' names and choices (delete,
remove, revoke, kick, clear, cancel, archive, ``trashed``, ``closed``, 删, 撤回, 移出): words start there."""
_RUNS_ANYTHING = re.compile(
    r"\b(?:down|exec\w*|run|shell|command|cmd|sql\w*|statement|script|bash|terminal|ssh|http|graphql|api|"
    r"(?<!pull )request|kubectl|docker|git|winget|brew|apt|query|raw|cli|psql|mysql|cypher|eval|invoke)\b"
    r"|执行|命令",
    re.IGNORECASE,
)
"""What a tool that runs whatever it is given is named (exec, a shell, a command, SQL, an HTTP or GraphQL request,
kubectl, ``read_query``): words start there. Not read in its description, where a passing word says nothing of what
the tool runs: Sentry's ``find_teams`` ("…to aid other tool requests") had made "delete the legacy-web project in
the acme org" one a tool could do, and ``create_project`` was called (a blind set of other people's tools,
2026-12-07)."""
_RUNS_GIVEN = re.compile(
    r"\b(?:exec\w*|shell|commands?|cmd|sql|statement|script|bash|graphql|kubectl|endpoint|cypher)\b|^(?:http )?method$"
    r"|执行|命令",
    re.IGNORECASE,
)
"""What an argument of a tool that runs whatever it is given is named (``command``, ``sql``, an HTTP ``method``);
not ``query``, which every search takes, nor ``payment_method``."""
_RUNS_DESCRIBED = re.compile(
    r"\b(?:execut|run)\w*\s+(?:(?:an?|any|arbitrary|raw|the|custom|read|write|redis|shell|sql|cypher)\s+){0,3}"
    r"(?:commands?|quer(?:y|ies)|statements?|scripts?|code|cypher|sql)\b"
    r"|\bsend\w*\s+(?:(?:an?|any|arbitrary|raw|custom)\s+)*(?:http|api|graphql)\b",
    re.IGNORECASE,
)
"""What a tool that runs whatever it is given says it does ("Execute a Cypher query", "Run any Redis command",
"Send an arbitrary HTTP request"): a verb with what it runs, not a passing word."""


def _runs_anything(tool: MetonaToolDef) -> bool:
    """The tool runs whatever it is given, by its name (:data:`_RUNS_ANYTHING`), an argument's
    (:data:`_RUNS_GIVEN`) or what its description says it runs (:data:`_RUNS_DESCRIBED`). A review (2026-12-07)
    found names read by their beginnings (``github_*``, ``download``, ``pull_request``), ``url`` and ``payment_method``
    arguments, and runners named otherwise (``redis_cli``, ``write_neo4j_cypher``): whole words now."""
    schema = tool.parameters.model_dump(mode="json", exclude_none=True)
    named = _RUNS_ANYTHING.search(" ".join(_tool_words(tool.name)))
    given = any(_RUNS_GIVEN.search(" ".join(_name_words(key))) for key, _ in _fields(schema) if key)
    return bool(named or given or _RUNS_DESCRIBED.search(tool.description or ""))


def _fields(spec: Any, key: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every field of a parameter schema however deep, with its key: the root under ``""``, an array's items under
    the array's key."""
    if not isinstance(spec, dict):
        return
    yield key, spec
    yield from _fields(spec.get("items"), key)
    for k, v in (spec.get("properties") or {}).items():
        yield from _fields(v, k)


def _all_it_says(tool: MetonaToolDef) -> str:
    """What a tool says of itself (:func:`_what_it_says`) and its arguments' names and choices, however deep."""
    schema = tool.parameters.model_dump(mode="json", exclude_none=True)
    parts = [_what_it_says(tool)]
    for key, spec in _fields(schema):
        parts.append(" ".join(_name_words(key)))
        parts.extend(str(v) for v in spec.get("enum") or ())
    return " ".join(parts)


def none_deletes(tools: Sequence[MetonaToolDef], text: str) -> bool:
    """The request commands a delete (:data:`_DELETE_ASKED`: "Delete contact 12345 from HubSpot, it's a duplicate.",
    "legacy-portal 这个 app 不要了，帮我直接删掉吧", "i-bp1abc123 这台ECS用不到了，帮我释放掉") and no offered tool
    deletes (:data:`_DELETES`, by :func:`_all_it_says`) or runs a command (:func:`_runs_anything`, by its name or
    its arguments'): nothing is called — offered list, create,
    rename, update or reboot tools, those requests had gone to ``create_app``, ``batch-update`` with a made-up
    status, ``RebootInstances`` (a blind set of other people's tools, 2026-12-07). A review (2026-12-07, 126
    hand-written requests) found a first version missing tools that delete under other words (revoke, kick, clear,
    cancel, an ``archived`` flag) or run anything (an HTTP request, kubectl), and reading "帮我恢复刚才删掉的…",
    "帮我释放一下内存", "Delete is greyed out…, why?" as deletes."""
    if not _DELETE_ASKED.search(text.strip()) or _NOT_A_DELETE.search(text):
        return False
    return not any(_DELETES.search(_all_it_says(t)) or _runs_anything(t) for t in tools)


_ASKED_OF = re.compile(
    r"^\W*(?:can|could|would|will|shall|may|might|should|why don'?t|how about|please)\b|\bplease\b"
    r"|\b(?:can|could|would|will) (?:you|u|we)\b|\bi(?:'d| would) like\b|\bi (?:really )?(?:want|need)\b|\bwanna\b"
    r"|\b(?:is there a way|is it possible|are you able|do you mind|would you mind|do you think you could|any chance)\b"
    r"|能|可以|帮|请|把|给|麻烦|替|要|让",
    re.IGNORECASE,
)
"""A question that asks for something to be done ("Can you merge it?", "Could you…", "I'd like…?", "Is there a way
to unstage everything?", "Do you mind…?"; a Chinese request form: "帮我…吗？", "你能…吗？", "可以…吗？")."""


_MUTATING_VERBS = frozenset(
    "create delete remove update merge write edit move rename drop kill cancel commit push reset install uninstall "
    "purchase buy pay transfer reschedule reserve overwrite truncate unlink upload publish sell set clear insert "
    "close archive".split()
)
"""Verbs of a tool's name that change what exists whatever the arguments (not ``add``, ``send``, ``post``,
``make``, ``submit``: ``add(a, b)`` sums, ``send_request`` and ``post_graphql_query`` read)."""
_INTERROGATIVE = re.compile(
    r"^\W*(?:what|which|who|whom|whose|where|when|why|is|are|was|were|does|do|did|has|have|how (?:many|much|long|old|"
    r"often|big))\b|哪|谁|什么|多少|几[个条项次]|是否|有没有|是不是",
    re.IGNORECASE,
)


def asks_not_does(tool: MetonaToolDef, text: str) -> bool:
    """``text`` is one question that asks for no action (it ends in a question mark, asks nothing of anyone —
    :data:`_ASKED_OF` — and holds none of the verbs the ``tool``'s name changes things by), and the tool changes
    things: "prs open on acme/api?" offered GitHub's tools went to ``merge_pull_request(pullNumber: 123)`` (a blind
    set of other people's tools, 2026-12-06; that terse form is no longer read so — "Refund charge ch_123?" is
    written alike —, and the made-up number refuses the call: :func:`_untold_id`); "Which PRs are open on acme/api?"
    is decided again without it. Of the 281 tuning cases whose right call changes things (BFCL and the MCP set,
    2026-12-06) none is such a question; 4 requests where no offered tool fits are ("What time is it?" beside
    ``update_repository``). Only a question that opens as one (:data:`_INTERROGATIVE`: what, which, is, how many;
    哪, 什么, 多少 — not a Chinese request form, 能…吗, 帮…; not a request asked as a question, "Is there a way
    to…?") and a verb that changes whatever the arguments (:data:`_MUTATING_VERBS`): a review (2026-12-06) found
    terse commands ("Refund charge ch_123?", "关一下客厅的灯？") and ``add`` for "What's 1234 plus 5678?"."""
    asked = text.strip()
    verbs = [w[:4] for w in _tool_words(tool.name) if w in _MUTATING_VERBS]
    if not verbs or not asked.endswith(("?", "？")) or _ASKED_OF.search(asked) or not _INTERROGATIVE.search(asked):
        return False
    if re.search(r"[.!?;]\s|[。！？；]", asked.rstrip("?？")):
        return False  # "Which lights are on? Turn them off.", "关掉所有灯。然后告诉我还有哪些开着？"
    return not any(w.startswith(v) for w in re.findall(r"[a-z]+", asked.lower()) for v in verbs)


_KNOWLEDGE_CUE = re.compile(
    r"\bfrom what you (?:already )?know\b|\bfrom your (?:own )?(?:knowledge|experience)\b|\boff the top of your head\b"
    r"|\bbased (?:purely |only |just |solely )?on (?:the name|your (?:own )?(?:knowledge|experience|training))\b"
    r"|\bwhat would you guess\b|\b(?:just|only) (?:guess|tell me what you (?:know|think))\b"
    r"|\bwithout (?:looking (?:it |anything )?up|searching|checking|running (?:it|anything)|using (?:any |the )?tools?)"
    r"(?=\s*(?:anything|online|the web|[,.?!:，]))"
    r"|\bfrom (?:your )?memory\s*[:：]|\b(?:answer|tell me|say|guess|recall)\b[^.?!]{0,20}\bfrom (?:your )?memory\b"
    r"|凭(?:你的?)?(?:经验|常识|知识|印象|感觉|理解)|凭你自己的|按常识|根据常识|靠常识|你自己(?:知道|了解)的",
    re.IGNORECASE,
)
"""Words that ask for the answer from what the model knows ("from what you know", "based purely on the name, what
would you guess", "without looking it up", "without running anything, from memory", 凭经验说说, 按常识). "just off
the top of your head" and "just curious" ask no action (:data:`_ACTION_ASKED`: a blind set of other people's tools,
2026-12-07, "don't search my library - just off the top of your head, what BibTeX entry type…?")."""
_NEGATED_LOOKUP = re.compile(
    r"\b(?:don'?t|do not|no need to|never mind|stop)\s+(?:\w+\s+){0,2}?(?:search\w*|look\w* (?:it |this |that "
    r"|anything )?up|check\w*|query\w*|call (?:any |the )?(?:tools?|functions?|apis?)|use (?:any |the )?tools?|"
    r"googl\w*|brows\w*|fetch\w*)"
    r"|(?:不要|不用|别|先别|无需|不必|用不着)(?!忘)(?:再)?(?:去)?[^，。,.；;！!？?]{0,10}?(?:查|搜|找|调用|用工具|碰|看)",
    re.IGNORECASE,
)
"""A look-up the request tells not to make ("don't search", "no need to check", 不要去 Linear 里查, 先别碰邮箱; not
"don't call me", 别忘了查)."""
_NOT_LOOKED_IN = re.compile(
    rf"(?:{_NEGATED_LOOKUP.pattern})"
    r"(?:[^\s，。,.；;！!？?：:、用去看查找]{1,8}"
    r"|(?:\s+(?!(?:and|but|just|instead|so|look|use|search|check|go|try|ask|read|open|see|find)\b)[A-Za-z0-9'’.-]+){0,3})",
    re.IGNORECASE,
)
"""A look-up the request tells not to make and what it is not to be made in, three words at most ("don't search my
library - …", "不要查我的笔记，…"): no question of the user's own things (:func:`from_knowledge`). Not what follows it
("Don't search the web look in my notes for…", "别上网搜 用我的笔记…": a review, 2026-12-07)."""
_LOOKUP = re.compile(r"\b(?:search|look up|check|find|query|fetch|get|list|show)\b|查|搜|找|看看", re.IGNORECASE)


_ACTION_ASKED = re.compile(
    r"\b(?:just|instead)\s+(?!(?:tell|say|guess|answer|explain|from|off|curious)\b)[a-z]+\b|直接|帮我|帮忙|把|请|给我(?!说|讲)|替我"
    r"|\b(?:my|our|the) (?:notes?|files?|docs?|documents?|database|db|calendar|inbox|todoist|repos?|plugin)\b"
    r"|\buse (?:the|my|your|a) \w+|笔记|我的文件|数据库|插件|日历|收件箱|能(?:不能)?(?:找到|看一下|查一下|列出|打开)",
    re.IGNORECASE,
)
"""What makes a request told not to look things up still one for a tool: an action asked ("…, just delete the key",
直接, 帮我, 把) or another source named ("my notes have it", "use the Kubernetes plugin", 笔记)."""
_NOT_BY = re.compile(
    r"(?:不想|不要|别|不是|not|don'?t want)\W*(?:\w+\W+){0,2}$|(?:不想|不要|别|不是)[^，。,.]{0,4}$", re.I
)


_ONLY_A_TOOL_KNOWS = re.compile(
    r"\b(?:weather|right now|currently|today|tonight|tomorrow|yesterday|latest|online|my|our)\b"
    r"|天气|现在|今天|明天|昨天|最新|到哪|我的|我们的|(?<=[a-z])\.(?:sh|py|js|ts|md|txt|json|ya?ml|csv)\b",
    re.IGNORECASE,
)
"""What no model knows: the present, the user's own things, a file's text."""


def from_knowledge(text: str) -> bool:
    """``text`` asks to be answered from what the model knows, or tells it not to look anything up and asks for
    no other look-up ("Don't search the web, search my notes…" does): "不要去 Linear 里查，凭经验说说：…" offered
    Linear's tools went to ``linear_search_issues`` with the question as its query, "算了，先别碰邮箱了。你就按常识
    说说…" to ``list_mailboxes`` (a blind set of other people's tools, 2026-12-06). None of the 1797
    tuning cases' requests (BFCL and the MCP set) reads so. Only a question (it ends in a question mark) that asks
    for no action and names no other source (:data:`_ACTION_ASKED`), and a cue not itself negated ("我不想你凭感觉"):
    a review (2026-12-06) found "No need to check the cache, just delete the key…", "不用搜了，打开客厅的灯" and
    "Don't search the web; my notes have it. What's the wifi password?" read so. Nor a question of what no model
    knows (:data:`_ONLY_A_TOOL_KNOWS`: the weather, now, "my…", a file's text — not in the look-up it bans, "don't
    search my library - just off the top of your head, …?") or one that holds an id ("No need to
    search, the ticket is ENG-42 — what's its status?"), nor "without searching the whole drive" (a limit, not a
    ban): a second review (2026-12-07, 56 hand-written requests) found those. A quoted word is no id ("what does
    "idempotent" mean?"); a quoted id still is."""
    asked = text.strip()
    rest = _NOT_LOOKED_IN.sub(" ", asked)  # "don't search my library - …": what is not to be searched is not asked
    if not asked.endswith(("?", "？")) or _ACTION_ASKED.search(rest):
        return False  # "不用帮我查，…": the 帮我 of what is not to be done asks nothing
    ids = (m.group() for m in _SALIENT.finditer(re.sub(r"[\"“”]", " ", asked)))  # a quoted word is no id
    if _ONLY_A_TOOL_KNOWS.search(rest) or any(not _NO_ID.fullmatch(found) for found in ids):
        return False  # "Don't check Slack, what's the weather in Berlin right now?", "…the ticket is ENG-42…"
    cue = _KNOWLEDGE_CUE.search(asked)
    if cue is not None:  # not negated in its own clause ("我不想你凭感觉"; "先别碰邮箱了，按常识说说" is not)
        if asked[cue.start() - 1 : cue.start()] == "我" or asked[cue.end() : cue.end() + 1] == "我":
            return False  # "我凭印象记得…", "凭经验我觉得…": the user's own memory
        return not _NOT_BY.search(re.split(r"[，。,.;；!?！？]", asked[: cue.start()])[-1])
    told = _NEGATED_LOOKUP.search(asked)
    return told is not None and not _LOOKUP.search(asked[: told.start()] + " " + asked[told.end() :])


_SOCIAL = re.compile(
    r"\b(?:thankyou|thanks?(?: (?:you|u))?(?: (?:so|very) much| a (?:ton|lot|bunch|million))?|thx|tysm|ty|cheers"
    r"|much appreciated|appreciate (?:it|that|you|your help)|great job|nice work|well done|good job|awesome|amazing"
    r"|perfect|brilliant|cool|nice|great|wonderful|lovely|excellent|lol|haha+|hehe|wow|yay|sweet"
    r"|good (?:morning|afternoon|evening|night)|hi|hello|hey|bye|goodbye|see (?:you|ya)(?: (?:tomorrow|later|soon))?"
    r"|have a (?:good|nice|great) (?:day|one|night)"
    r"|for (?:all )?(?:your|the) help|you(?:'re| are) (?:the best|awesome|amazing|a lifesaver))\b"
    r"|谢谢你?|谢啦|多谢|感谢|辛苦(?:你)?[了啦]|太棒了|真棒|哈哈+|你好|早上好|晚上好|晚安|再见|拜拜|厉害|完美",
    re.IGNORECASE,
)
"""Thanks, praise, a greeting, a goodbye, a laugh (:func:`only_social`); not "ok", "好的", "got it": a yes to what
the assistant offered to do."""
_SAID_OF_IT = re.compile(
    r"\b(?:that|this|the|your|it|those|these)\b[\w\s'-]{0,40}?\b(?:was|is|were|are|came out|comes out|looks?|looked"
    r"|worked|works|went|turned out|sounds?|sounded|seems?|helped)\b(?:\s+(?:so|super|really|very|quite|just|totally"
    r"|absolutely|pretty|extremely|incredibly))?(?:\s+(?:helpful|useful|clear|good|right|spot on|on point"
    r"|(?:exactly )?what i (?:needed|wanted)|exactly))?",
    re.IGNORECASE,
)
"""What a thank-you says of what was done ("that screenshot came out perfect", "that transcript was super
helpful")."""
_FILLER = re.compile(
    r"\b(?:so|very|much|really|just|all|a|lot|ton|for|everything|again|today|you|me|i|man|mate|buddy|dude|guys"
    r"|oh|ah|yeah|omg|lmao|and|there|that'?s (?:all|it|exactly what i needed)|that is all|i'?m good"
    r"|no need|no more questions|bye for now|for now|as always|once again)\b|[:;]-?[DP)(]|<3"
    r"|知道了|今天就先这样|今天就到这里|就先这样|先这样|就这样|没问题|明白了|了解了|好的|麻烦了|不用了|你的帮助|帮助|辛苦"
    r"|了|啊|呀|哦|嗯|啦|哈|你|的|我|呢|吧",
    re.IGNORECASE,
)
"""Words a thank-you or a greeting is said with, nothing asked in them."""


def only_social(messages: Sequence[MetonaMessage]) -> bool:
    """The user's message only thanks, praises, greets or says goodbye ("lol that screenshot came out perfect,
    thanks a ton", "Thanks for your help today!", "谢谢，辛苦了"): no offered tool is for it, whatever words it
    shares with one (``browser_snapshot`` had been called for the first; a blind set of other people's tools,
    2026-12-07). Nothing else may be left once the thanks (:data:`_SOCIAL`), what it says of what was done
    (:data:`_SAID_OF_IT`) and the words it is said with (:data:`_FILLER`) are taken out: a review (2026-12-07, 141
    hand-written messages) found a first version, which counted the words left, reading "perfect, mark it done",
    "hi, weather in berlin", "Weather in Nice", "谢谢，那明天的天气" as thanks. Never a reply to an assistant's
    message that asked anything ("Want me to email the team? I can draft it now." — "great, thanks"): its yes may be
    in it."""
    said = question(messages).strip()
    before = [m for m in messages[: turn_start(messages) - 1] if m.role == "assistant" and (m.content or "").strip()]
    if before and re.search(r"[?？]", before[-1].content or ""):
        return False
    if not _SOCIAL.search(said):
        return False
    rest = _FILLER.sub(" ", _SOCIAL.sub(" ", _SAID_OF_IT.sub(" ", said)))
    return not re.search(r"[^\W_]", rest)


_SERVICES = {
    "google workspace": "gmail|google docs|google drive|google calendar|google sheets|google workspace|g suite",
    "microsoft 365": "outlook|hotmail|MS Teams|microsoft teams|onedrive|sharepoint|onenote|office 365|microsoft 365"
    "|m365",
    "icloud": "icloud|apple calendar", "yahoo": "yahoo mail", "proton": "protonmail|proton mail", "qqmail": "qq邮箱",
    "163mail": "163邮箱", "slack": "Slack", "discord": "Discord", "telegram": "Telegram", "whatsapp": "whatsapp",
    "feishu": "feishu|Lark|飞书", "dingtalk": "dingtalk|钉钉",
    "wechat": "wechat|微信|企业微信|wecom|微信支付|wechat pay",
    "notion": "Notion", "atlassian": "jira|confluence", "obsidian": "Obsidian", "evernote": "evernote|印象笔记",
    "yuque": "yuque|语雀", "tencentdocs": "腾讯文档", "shimo": "石墨文档", "linear": "Linear", "asana": "Asana",
    "trello": "trello", "todoist": "todoist", "clickup": "clickup", "ticktick": "ticktick|滴答清单",
    "github": "github", "gitlab": "gitlab", "bitbucket": "bitbucket", "gitee": "gitee|码云",
    "aws": "aws|route 53|amazon web services", "azure": "Azure", "gcp": "google cloud|gcp",
    "aliyun": "阿里云|aliyun|alibaba cloud", "tencentcloud": "腾讯云", "huaweicloud": "华为云",
    "cloudflare": "cloudflare", "heroku": "heroku", "netlify": "netlify", "vercel": "vercel",
    "digitalocean": "digitalocean", "supabase": "supabase", "firebase": "firebase", "stripe": "Stripe",
    "paypal": "paypal", "alipay": "支付宝|alipay", "googlemaps": "google maps", "amap": "高德|amap",
    "baidumaps": "百度地图|baidu maps", "applemaps": "apple maps", "mapbox": "mapbox", "tencentmaps": "腾讯地图",
    "spotify": "spotify", "applemusic": "apple music", "neteasemusic": "网易云音乐", "qqmusic": "qq音乐",
    "youtube": "youtube", "bilibili": "bilibili|b站|哔哩哔哩", "douyin": "抖音|douyin", "tiktok": "tiktok",
    "netflix": "netflix", "xiaohongshu": "小红书|xiaohongshu", "x": "twitter|推特", "dropbox": "dropbox",
    "baidupan": "百度网盘", "shopify": "shopify", "taobao": "淘宝", "jd": "京东", "hubspot": "hubspot",
    "salesforce": "salesforce", "zendesk": "zendesk", "grafana": "grafana", "datadog": "datadog", "sentry": "Sentry",
    "pagerduty": "pagerduty", "airtable": "airtable", "figma": "figma",
}  # fmt: skip
"""Apps and services a request may name, by the names users write, one entry for what one vendor's server serves
together (Gmail, Drive and Calendar; Outlook, Teams and OneDrive; Jira and Confluence; 飞书 and Lark; Route 53 and
AWS): a request for one of them is not served by another's tools (:func:`another_service`). Not search engines
("google it" asks for any search) nor databases (a dialect, not a service). A name that is an English word too
(Slack, Linear, Notion, Asana, Stripe, Azure…) only capitalised; "teams" and "square" not at all."""
_SERVICE_OF = {name.lower(): service for service, names in _SERVICES.items() for name in names.split("|")}


def _service_pattern(name: str, cased: bool = True) -> str:
    word = name[0].isupper() and name[1:].islower()
    spelled = rf"(?-i:{re.escape(name)})" if cased and word else re.escape(name)
    if not name.isascii():
        return rf"(?<![A-Za-z]){spelled}(?!方)"  # not Web站点, not 京东方
    return rf"(?<![\w@./-]){spelled}(?![\w]|\.[a-z])"  # not bob@outlook.com, github.com/…, AWS_REGION


_ALL_NAMES = sorted((n for names in _SERVICES.values() for n in names.split("|")), key=len, reverse=True)
_SERVICE_NAMES = re.compile("|".join(_service_pattern(n) for n in _ALL_NAMES), re.I)
_TOOL_SERVICE_NAMES = re.compile("|".join(_service_pattern(n, cased=False) for n in _ALL_NAMES), re.I)
"""A tool's name names its service in any case (``slack_post_message``); its description as a request does."""
_AT_THE_SERVICE = re.compile(
    r"\b(?:in|on|into|onto|via|using|through)\s+(?:(?:my|our|the|your)\s+)?(?:[#@][\w-]+\s+)?$"
    r"|\b(?:search|check|look through|browse)\s+(?:my|our)\s+$"
    r"|(?:在|用|到|去)\s*(?:我的?|我们的?)?\s*$"
)
"""What before a service's name makes it where the request is to be done ("in our #design Slack channel", "在钉钉的
群里", "用支付宝")."""
_THE_SERVICES_OWN = re.compile(
    r"^(?:'s)?\s+(?:subscription|balance|inbox|calendar|wallet|workspace|channel|server|group chat|dms?)\b"
    r"|^\s?[\w ]{0,8}?(?:里|上面|上|中|账户|账号|余额|订阅|群|频道|日历|邮箱|网盘|实例|控制台)"
)
"""What after a service's name makes it the user's place there ("my Netflix subscription", "我 Outlook 日历里",
"阿里云 RDS 实例")."""
_NOT_THERE = re.compile(
    r"\b(?:not|don'?t|never|no)\b[^.,;!?]{0,12}$|(?:别|不要|不用|不是|不在)[^，。]{0,6}$"
    r"|\b(?:who|which|that|where|whose)\b[^.,;!?:]*$"
    r"|(?:^|[,.;!?:]\s*)(?:i'?m|i am|i was|we'?re|we are|i'?ve|we'?ve)\b[^.,;!?]*$",
    re.I,
)
"""A service named as not the place ("Not on Slack — email it"), in a relative clause ("the customer who paid via
the Shopify store") or in what the user says of themselves ("I'm working on my GitHub PRs")."""


def _services(text: str, names: re.Pattern[str] = _SERVICE_NAMES) -> set[str]:
    """The services of :data:`_SERVICES` ``text`` names (not in a mail or a web address: ``bob@outlook.com``)."""
    return {_SERVICE_OF[m.group().lower()] for m in names.finditer(text)}


_MY = re.compile(r"\b(?:my|our)\s+$", re.I)


def _services_at(text: str) -> set[str]:
    """The services ``text`` names as where it is to be done (:data:`_AT_THE_SERVICE`, :data:`_THE_SERVICES_OWN`),
    not one ruled out ("Not on Slack — email it")."""
    out = set()
    for m in _SERVICE_NAMES.finditer(text):
        before, after = text[max(0, m.start() - 40) : m.start()], text[m.end() :]
        place = _THE_SERVICES_OWN.search(after)  # "我 Outlook 日历里"; in English "my Netflix subscription" only
        own = place is not None and (bool(_CJK.search(place.group() + m.group())) or bool(_MY.search(before)))
        if (_AT_THE_SERVICE.search(before) or own) and not _NOT_THERE.search(before):
            out.add(_SERVICE_OF[m.group().lower()])
    return out


def another_service(tools: Sequence[MetonaToolDef], text: str) -> bool:
    """The request is to be done in an app or a service (:data:`_SERVICES`, named as the place: "在钉钉的群里",
    "in our Slack channel", "my Netflix subscription") that no offered tool speaks of, and names none they do, while
    they speak of another: "在钉钉的“产品研发部”群里@所有人…" offered Feishu's messaging tools had listed Feishu's
    chats, "看看我 Outlook 日历里明天下午有没有会" offered Gmail's went to ``read_email`` (a blind set of other
    people's tools, 2026-12-07). None of its tools is for that service; it is answered. A review (2026-12-07, 131
    hand-written requests) found a first version, which took any service named, refusing a service as the topic
    ("Search my inbox for the Stripe receipt", "Tell #design the Figma file is updated"), one ruled out, a vendor's
    other product (Outlook for Microsoft 365's mailbox) and words (`AWS_REGION`, "asana practice", 京东方)."""
    asked = _services_at(text)
    if not asked or _services(text) - asked:
        return False  # nowhere named as the place, or another service named beside it
    theirs: set[str] = set()
    for t in tools:
        theirs |= _services(" ".join(_tool_words(t.name)), _TOOL_SERVICE_NAMES) | _services(t.description)
    return bool(theirs) and not asked & theirs


_DELETE = "delet remov trash drop purg destroy eras unlink discard cancel rm del 删 移除 取消"
_BOOK = "book reserv schedul appoint event meet calendar hold request 订 预约 预定"
_BUY = "buy purchas order checkout cart trade 买 购 下单"
_SEND = "send post messag email mail repl notif remind forward share text sms chat pay transfer 发送 发给 发布"
_DOERS = {
    "cancel": "cancel abort revok void terminat stop disabl " + _DELETE + " 退",
    "refund": "refund revers cancel return 退",
    "delete": _DELETE,
    "remove": _DELETE,
    "transfer": "transfer send pay move 转账 转让 转给",
    "share": "share permission access invit send collaborat grant role post 分享 共享",
    "book": _BOOK + " " + _BUY,
    "reserve": _BOOK,
    "buy": _BUY + " " + _BOOK,
    "purchase": _BUY,
    "send": _SEND,
    "email": "email mail send messag 邮件 发送",
    "pay": "pay paid payment charg transfer send settl top 付 支付",
    "unsubscribe": "unsubscrib subscript cancel 退订 取消",
    "invite": "invit attendee member share add 邀请",
    "merge": "merg combin join 合并",
    "approve": "approv review accept 批准 审批",
    "reject": "reject declin deny respon review 拒绝",
    "decline": "declin reject deny respon review 拒绝",
    "publish": "publish releas deploy post 发布",
}
"""What a request commands by its first verb ("Cancel my Netflix subscription", "Delete the message I posted",
"Transfer ownership of our repo…") and the words a tool that does it may speak with, in its name or its description
(English word starts — a stem of four letters or fewer a whole word —, or Chinese words): a tool that cancels may
delete; one that books may reserve, schedule or hold; one that sends may post, reply, notify, pay. Only verbs whose
doing no tool that reads can stand in for: not "rename", "move", "archive", "upload", "set", "add", nor "order" (the
files ordered by size)."""
_ZH_DOERS = {
    "退掉": "refund", "退了": "refund", "退款": "refund", "退票": "refund", "退": "refund", "取消": "cancel",
    "删": "delete", "转让": "transfer", "转给": "transfer", "转账": "transfer", "分享": "share", "共享": "share",
    "订": "book", "预订": "book", "预定": "book", "预约": "book", "购买": "buy", "买": "buy", "下单": "buy",
    "发给": "send", "发送": "send", "付款": "pay", "支付": "pay", "邀请": "invite", "合并": "merge",
}  # fmt: skip
"""A Chinese request's verbs, each read as the English verb of :data:`_DOERS` it commands."""
_COMMAND_LEAD = (
    r"^\W*(?:(?:hey|hi|ok(?:ay)?|please|pls|kindly|just|(?:can|could|would|will) (?:you|u)|go ahead and|help me"
    r"|i(?:'d| would)? (?:like|want|need) (?:you )?to)[,\s]+)*"
)
_FIRST_COMMAND = re.compile(
    _COMMAND_LEAD + r"(" + "|".join(_DOERS) + r")\b(?!\s*(?:of|is|was|:)(?:\W|$))"
    r"(?:(?<=send|mail|hare)(?!\s+(?:me|us|what|how|why|your|some|any|a few|over)\b)|(?<!send|mail|hare))",
    re.I,
)
_ZH_VERB = r"(" + "|".join(sorted(_ZH_DOERS, key=len, reverse=True)) + r")(?![的单出订阅正我])"
_ZH_COMMAND = re.compile(
    r"^\W*(?:你好|您好)?[，,\s]*(?:请你?|麻烦你?|能不能|可以|你)?(?:帮我|帮忙|给我|替我)?(?:我想|我要)?"
    r"(?:" + _ZH_VERB + r"|(?:把|将)[^，。,.；;？?！!]{1,30}?(?:给)?" + _ZH_VERB + r"(?=[了掉吧。！!，,；;]|一下|给|$))"
)
_ASKS_THE_DEED = re.compile(
    r"^\W*(?:(?:hey|hi|ok(?:ay)?|please|pls|kindly)[,\s]+)*(?:can|could|would|will) (?:you|u)\b"
    r"|^\W*(?:你好|您好)?[，,\s]*(?:请|麻烦|帮|能|可以)",
    re.I,
)
"""A question that asks for a deed ("Can you book…?", "能帮我把票退了吗？")."""
_A_NOUN = re.compile(
    r"\s+(?:history|status|price|prices|policy|policies|address|details|fees?|limits?|records?|logs?|receipts?"
    r"|confirmation|number|ids?|dates?|options?|settings?|rules?|deadline|window)\b",
    re.I,
)
"""The verb is a noun's first word ("Transfer history for March", "Order status"): no command."""
_TO_SOMEONE = re.compile(r"\b(?:to|with)\s+(?!(?:me|us|myself)\b)\w|(?<!\w)[@#]\w|\S@\S", re.I)
"""Whom a sending or a sharing goes to: without one, "send" and "share" ask to be shown."""
_READ_VERBS = frozenset(
    "get list search find fetch read query retrieve describe show lookup look check view count browse inspect "
    "info status stats".split()
)
"""Verbs of a tool's name that read ("get_tickets", "search_products", ``Trains_1_FindTrains``)."""


def _what_it_says(tool: MetonaToolDef) -> str:
    """A tool's name in words (:func:`_tool_words`) and its description: where it speaks of what it does."""
    return f"{' '.join(_tool_words(tool.name))} {tool.description or ''}"


def none_does_it(tools: Sequence[MetonaToolDef], text: str) -> bool:
    """The request ``text`` opens with a command (:data:`_FIRST_COMMAND`, :data:`_ZH_COMMAND`: "Delete the customer
    cus_…", "帮我把…那张票退掉", "帮我订一张…机票") and every offered tool only reads — its name holds a verb of
    :data:`_READ_VERBS` and none that changes things (:data:`_CHANGE_VERBS`) — and none speaks of doing it in its
    name or its description (:data:`_DOERS`), so no call is made and the answer says what can and cannot be done.
    Offered 12306's ticket search, "帮我把昨天在12306上买的那张 G105 的票退掉" searched tickets for ``date:
    "昨天"`` and "帮我订一张下周五从上海飞成都的机票" searched trains (a blind set of other people's tools,
    2026-12-06). A review over 362 hand-written requests (2026-12-07) found a first version, which asked only that no
    tool speak of it, refusing right calls by tools that do it under other words ("Book an Uber" →
    ``uber_request_ride``, "Restart nginx" → ``ssh_exec``, "Share the deck as an editor" → ``drive_grant_role``):
    a tool that may act is not judged. Nor is a question ("Share price of Apple today?", "退款到账了吗？") unless it
    asks for the deed ("Can you book…?", 帮我…吗), "send me" or a sending to nobody (show me: "Share tomorrow's
    agenda"), a noun ("Transfer history for March", 订单, 订阅, 退出) or a clause's own noun before 把's verb
    ("把已取消订单列出来")."""
    asked = text.strip()
    if (asked.endswith(("?", "？")) or asked.rstrip("?？").endswith("吗")) and not _ASKS_THE_DEED.match(asked):
        return False
    command = _FIRST_COMMAND.match(asked)
    verb = command.group(1).lower() if command else None
    if verb is None and (zh := _ZH_COMMAND.match(asked)) is not None:
        verb = _ZH_DOERS[zh.group(1) or zh.group(2)]
    if verb is None or not tools or (command and _A_NOUN.match(asked, command.end())):
        return False
    if verb in ("send", "share") and not _TO_SOMEONE.search(asked):
        return False  # "Send the contents of todo.md", "Share tomorrow's agenda": show me
    for t in tools:
        words = set(_tool_words(t.name))
        if not words & _READ_VERBS or words & _CHANGE_VERBS:
            return False
    said = " ".join(_what_it_says(t) for t in tools).lower()
    for w in _DOERS[verb].split():
        if _CJK.match(w):
            if w in said:
                return False
        elif re.search(rf"\b{w}(?:s|ed|ing)?\b" if len(w) <= 4 else rf"\b{w}", said):
            return False
    return True


_REWORDING = re.compile(
    r"^\W*(?:(?:please|pls|kindly|can you|could you|would you|help me|i need you to)\s+)*"
    r"(?:translate|proofread|paraphrase|rephrase|reword|polish)\b"
    r"|^\W*(?:请你?|麻烦你?|你|帮我|帮忙|能不能|可以)*(?:把[^，。,.；;？?！!]{0,30}?)?(?:翻译|翻成|译成|译为|润色|改写|校对|校正)",
    re.IGNORECASE,
)
_DOUBLE_QUOTED = re.compile(r"[“「『\"][^”」』\"]{2,}[”」』\"]")
"""A text in double quotes or 「」 (an apostrophe ends none: "'it's jammed'")."""
_QUOTED_TEXT = re.compile(_DOUBLE_QUOTED.pattern + r"|(?<!\w)'[^']{2,}'")
_GIVEN_TEXT = re.compile(r"[:：]\s*\S|" + _QUOTED_TEXT.pattern)
"""The text to reword, in the request itself: after a colon, or quoted (:data:`_QUOTED_TEXT`)."""
_FILE_NAMED = re.compile(r"\.\w{1,5}\b|[/\\]")
"""A file's name or a path in the request: the text to reword may be there, read first."""
_DELIVERED = re.compile(
    r"\band\s+(?:then\s+)?(?:send|post|tweet|email|reply|add|forward|share|publish|comment|save|put)\b"
    r"|\S@\S|发给|发到|发送|回复给|通知|加到|记在|贴到|并(?:回复|发)|发出",
    re.IGNORECASE,
)
"""The reworded text is to go somewhere: sent, posted, replied, filed."""
_REFERENCE = re.compile(r"^\W*(?:the one|that one|[A-Z][A-Z0-9]+-\d+\W*$)|那封|那条|那个|的那", re.IGNORECASE)
"""What follows the colon points at where the text is ("…: PROJ-311", "…：主题是“…”的那封"), not the text."""
_REWORDS = re.compile(
    r"translat|proofread|paraphras|rephras|reword|polish|grammar|spell|style|clarity|\btone\b|another language"
    r"|between languages|翻译|译|润色|改写|校对|错别字|语病|语法|语种",
    re.I,
)


def rewords_it_itself(tools: Sequence[MetonaToolDef], text: str) -> bool:
    """The request opens by asking for a text to be translated, proofread or reworded ("帮我把这段英文邮件翻成中文，
    语气正式一点：'Dear all, …'", "Translate this into English: …") and no offered tool speaks of doing so (its name
    or its description: :data:`_REWORDS`): the model writes it, as the answer. Only for a text the request itself
    holds (after a colon, or quoted: :data:`_GIVEN_TEXT`), and where the words around it name no file (whose text is
    read first), no step after it, no saving and nowhere for it to go (:data:`_NEXT_STEP`, :data:`_SAVE_WORDS`,
    :data:`_DELIVERED`: "把这段话翻译成英文发给 Tom：…"), and what follows the colon is no pointer at the text
    (:data:`_REFERENCE`) — narrowed on a review over 60 hand-written requests (2026-12-07), which found the first
    version firing on texts to be posted and on tools that check "spelling, punctuation and style". Offered a mail
    server's ``send_email``, that request sent the translation to ``["all"]``; offered bilibili's video tools,
    "帮我把这段B站视频简介翻译成英文：…" fetched a made-up video (a blind set of other people's tools, 2026-12-07)."""
    asked = text.strip()
    given = _GIVEN_TEXT.search(asked)
    if not _REWORDING.search(asked) or given is None:
        return False
    quotes = list(_QUOTED_TEXT.finditer(asked))
    asks = asked[: given.start()] + (asked[quotes[-1].end() :] if quotes else "")  # the words around the text
    if _FILE_NAMED.search(asks) or _NEXT_STEP.search(asks) or _SAVE_WORDS.search(asks) or _WRITE_WORDS.search(asks):
        return False  # a file's text, a step after it or a saving: the tools may be for that
    if _DELIVERED.search(asks) or _REFERENCE.search(re.sub(r"^\W+", "", asked[given.start() :])):
        return False  # "…and post it in #support: '…'", "翻译一下这封邮件：主题是…的那封"
    return not any(_REWORDS.search(_what_it_says(t)) for t in tools)


_FOLDER_PATH = re.compile(r"(?<![\w:/\\.])(?:[A-Za-z]:[\\/]|~[\\/]|/)[^\s\"'“”‘’「」，。；、？！?!,;()（）]+")


def folder_paths(text: str) -> list[str]:
    """The absolute paths a request names (``/home/li/projects/blog``, ``C:\\Users\\Kevin\\Downloads``, ``~/code``):
    a folder, or a file, given from its root."""
    return [m.group().rstrip(".:") for m in _FOLDER_PATH.finditer(text) if len(m.group().rstrip(".:")) > 1]


def _path_texts(tool: MetonaToolDef) -> tuple[str, str]:
    """What a tool says of where it works: its description's first sentence and its :data:`PATH_ARGUMENT`'s own
    description ("" without one)."""
    path = _path_argument(tool)
    return first_sentence(tool.description), str(path[0].get("description") or "") if path else ""


def _about_folders(tool: MetonaToolDef) -> bool:
    return any(_FOLDER_WORDS.search(t) for t in _path_texts(tool))


def grounded(tool: MetonaToolDef, messages: Sequence[MetonaMessage]) -> bool:
    """The call may be made: the tool does not :func:`names_its_file`; or it reads (:func:`changes_things` says
    no) and the request names a file (:func:`request_paths`), a path from its root (:func:`folder_paths`) or a
    folder (:func:`named_folder`); or it changes things, the request :func:`asks_for_a_change` and names a file
    for it — or, for a tool on folders (``create_directory``), a path. The tool stays in the decision's list either
    way (taking it out changed the 0.5B model's other choices: "Write a haiku" went to the calculator); when the
    model names it for a request that names no file, the answer is written instead. Called anyway, it wrote "a
    haiku about autumn" to ``autumn_haiku.txt`` and a short poem to a file. A plugin's file tools need permission
    (their annotations are not trusted), so until 2026-12-05 its reads were held to this too and never made
    ("帮我查下 /Users/zhou/Movies/毕业典礼.mp4 这个文件有多大" → get_file_info at p 0.96, answered: 8 of 18
    filesystem requests written for this by a helper)."""
    if not names_its_file(tool):
        return True
    asked = question(messages)
    files, roots = request_paths(messages), folder_paths(asked)
    if changes_things(tool):
        return asks_for_a_change(messages) and bool(files or (roots and _about_folders(tool)))
    return bool(files or roots or named_folder(asked))


def _as_words(words: str) -> str:
    """A request's pattern for ``words`` (``|``-separated) as words of their own: not part of a file's name, a path or
    a longer word ("encrypt.log", "~/decode/", "encrypted" hold no ask to encrypt or decode)."""
    return rf"(?<![\w./\\~-])(?:{words})(?![\w-]|\.\w)"


def _side(names: str, asks: str, says: str) -> tuple[frozenset[str], re.Pattern[str], re.Pattern[str]]:
    """One side of a pair of :data:`_OPPOSITES`: the words a tool's name says it with; what a request says to ask for
    it (the bare verb or noun: "encrypt the file", 加密; never a state, "my encrypted notes"); and what speaks of it
    at all (any form: "encrypted", "加密的" speaks of encrypting)."""
    return frozenset(names.split()), re.compile(asks, re.IGNORECASE), re.compile(says, re.IGNORECASE)


_WHOM = r"(?:(?:me|him|her|them|us|you|it)\s+)?"
"""Who is logged in or out, between the verb and its particle ("log me out")."""
_LOG_IN = rf"\b(?:log|sign)[\s-]?{_WHOM}(?:in|on)\b|(?<!退出)登录|登入"
_LOG_OUT = rf"\b(?:log|sign)[\s-]?{_WHOM}(?:out|off)\b|登出|注销|退出"
_OPPOSITES = (
    (_side("login signin logon", _LOG_IN, _LOG_IN + r"|\blog[\s-]?in"),
     _side("logout signout logoff", _LOG_OUT, _LOG_OUT)),
    (_side("sunrise", _as_words("sunrise") + "|日出", r"sunrise|日出"),
     _side("sunset", _as_words("sunset") + "|日落", r"sunset|日落")),
    (_side("encrypt", _as_words("encrypt") + "|(?<![已解])加密(?![的过了])", r"encrypt|加密"),
     _side("decrypt", _as_words("decrypt") + "|解密", r"decrypt|解密")),
    (_side("encode", _as_words("encode") + "|(?<!已)编码(?![的过了])", r"encod|编码"),
     _side("decode", _as_words("decode") + "|解码", r"decod|解码")),
)  # fmt: skip
"""Pairs of opposite actions, each side the words a tool's name says it with, what a request says to ask for it and
what speaks of it at all (English, Chinese): :func:`opposed`. Only pairs whose words a request uses for the action
itself: a review (2026-12-06) found the words of wider pairs describing rather than asking ("I'm on mute, fix it"
for ``unmute``, "a sudden increase in volume, turn it down" for ``decrease_volume``, "the highest rated seller" for
a minimum price, "the external vendor" for an internal wiki, "arrive by 5pm" for departures, "my smart lock is
stuck" for ``unlock_door``), so no mute, follow, subscribe, block, lock, install, connect, increase, buy/sell,
upload/download, import/export, min/max, internal/external, arrival/departure, open/close, start/stop."""


_COMMANDED = re.compile(r"\s*(?:(?:please|pls|kindly|(?:can|could|would) you|go ahead and)\s+)*([A-Za-z]+)\b", re.I)


_NOT_A_COMMAND = re.compile(
    r"\b(?:back|off|undo|revert|roll|won'?t|doesn'?t|isn'?t|can'?t|broke|broken|stuck|away|stop|remove|not)\b"
    r"|[-‐]\s*up\b",
    re.IGNORECASE,
)
"""Words that make a request's first word something other than a command to do it: a state or an undoing ("Lock
screen won't go away", "Install of numpy broke my env, roll it back", "Archive has my old chat… bring it back",
"Follow-up on…"): :func:`_undoes` lets the tool be."""
_UN_STATES = frozenset("unread unknown unseen unpaid unsent unused unsaved unsolved unsigned unlisted".split())


def _undoes(tool: MetonaToolDef, asked: str) -> bool:
    """The request commands a verb (its first word, after "please", "can you") that the tool undoes: its name's first
    word (after a plugin's ``x__`` prefix), or its description's, is that verb with "un" before it — "Stage README.md
    and setup.py in ~/code/tool" offered mcp-server-git's ``git_reset`` ("Unstages all staged changes"; a request of
    this project's own MCP tuning set, 2026-12-06), "Follow @ana" → ``unfollow_user``, "Install numpy" →
    ``uninstall_package``. Not when the request says the un-verb too, nor a request that describes rather than
    commands ("I'm on mute", "Lock screen won't go away": :data:`_NOT_A_COMMAND`), nor a tool that does both (its name
    or description holds the verb too: ``lock_unlock_door``, "Uninstall or install a package"), nor an un-word that
    is a state ("Read my notifications" offered ``unread_notifications``)."""
    command = _COMMANDED.match(asked)
    if command is None or _NOT_A_COMMAND.search(asked):
        return False
    verb = command.group(1).lower()
    said = _words(asked)
    name = _tool_words(tool.name.rsplit("__", 1)[-1])
    described = tool.description or ""
    both = re.search(rf"\b(?:{verb}\w*\s+or\s+un{verb}|un{verb}\w*\s+or\s+{verb})", described, re.IGNORECASE)
    leading = [*name[:1], *(w.lower() for w in _WORD.findall(described)[:1])]
    for word in leading:
        if not word.startswith("un") or len(word) < 6 or word in _UN_STATES or word.endswith("ed"):
            continue
        undone = word[2:]
        if verb not in (undone, undone.removesuffix("s"), undone.removesuffix("es")) or verb in name or both:
            continue
        return "un" + verb not in said and not any(w.startswith("un" + verb) for w in said)
    return False


_CREATE_VERBS = frozenset("create new insert".split())
_UPDATE_VERBS = frozenset("update edit modify set patch change rename move replace".split())
_ASKS_A_CHANGE = re.compile(
    r"^\W*(?:(?:please|pls|can you|could you)\s+)?(?:change|modify|edit|rename)\b(?!\s*(?:of\b|:))"
    r"|^[^，。,.：:]{0,6}(?:把|将)[^，。,.：:]{1,30}?(?:从[^，。,.：:]{1,12})?(?:改成|改为|换成|修改为)",
    re.IGNORECASE,
)
_SPEAKS_OF_NEW = re.compile(r"\b(?:new|create|add|make)\b|新建|创建|新增|添加|加一|建一|新的", re.IGNORECASE)


def _creates_for_a_change(tool: MetonaToolDef, asked: str) -> bool:
    """The request commands a change to something that exists ("Change…", "Rename…", 把…改成, 将…换成)
    and speaks of nothing new, and the tool's name creates (``create_repository``, ``insert_row``) and does not
    update: "把 acme/widgets 这个仓库从公开改成私有。" offered GitHub's tools went to ``create_repository``
    (a blind set of other people's tools, 2026-12-06). None of the 42 tuning cases whose right call creates
    asks so. Only a command that opens so (not "Change of plans:", "Edit:", "Update #eng: …", nor 修改 as a
    task's text: "在 Todoist 加个任务：修改简历"), and a tool that creates and does nothing else by its name
    (not ``add_comment``, ``post_message``): a review (2026-12-06) found those."""
    words = set(_tool_words(tool.name))
    if not words & _CREATE_VERBS or words & _UPDATE_VERBS:
        return False
    return bool(_ASKS_A_CHANGE.search(asked)) and not _SPEAKS_OF_NEW.search(asked)


def opposed(tool: MetonaToolDef, messages: Sequence[MetonaMessage]) -> bool:
    """The tool does the opposite of what the current request asks, by the words of its name (:func:`_tool_words`,
    adjacent ones joined: ``auth_log_in`` is a login) and :data:`_OPPOSITES`: "I'd like to log out" offered
    ``user_authentication_login``, "When will be sunset in Beijing today?" → ``calculate_sunrise`` (BFCL's no-call
    kinds, tuning half, 2026-12-06: 3 wrong calls; none of the tuning half's right recorded calls is refused). The
    call is not made; the answer is written instead. A name that holds both sides of a pair, and a request that
    speaks of both, are not judged."""
    words = _tool_words(tool.name)
    name = {*words, *(a + b for a, b in itertools.pairwise(words))}  # auth_log_in: login
    asked = question(messages)
    if _undoes(tool, asked) or _creates_for_a_change(tool, asked):
        return True
    for a, b in _OPPOSITES:
        for (mine, _, speaks_of_it), (theirs, asks_for_that, _) in ((a, b), (b, a)):
            if name & mine and not name & theirs and asks_for_that.search(asked) and not speaks_of_it.search(asked):
                return True
    return False


_SAVE_WORDS = re.compile(
    r"\b(?:save[ds]?|saving|store)\b(?!\s*[$¥€£]?\s*\d)|保存|存到|存入|存为|存成|存下(?!\s*[$¥€£]?\d)|另存",
    re.IGNORECASE,
)
"""Saving an outcome; not money saved ("I save 22% of it", "每月存下2000"): a number follows."""
_WRITE_WORDS = re.compile(r"\b(?:write|put|record|export)\b|写入|写到|写进|写成|记到|记下|导出", re.IGNORECASE)
_FILE_WORDS = re.compile(r"\b(?:files?|document)\b|文件|文档", re.IGNORECASE)


def wants_a_file(messages: Sequence[MetonaMessage]) -> bool:
    """The current request asks for something to be saved ("save this", "把这段话保存下来") or written to a file
    ("write this to a file"): when the model chooses a tool that :func:`names_its_file` at the turn's first
    decision and the request names no file, the user is asked which file (:func:`which_file`). A request that
    only speaks of a file ("which file mentions X?", "哪个文件里提到了发票") or of writing without a file
    ("Write a haiku about autumn") is answered instead; so is a later decision (after a note lookup on how to
    store something — 保存 — the 0.5B model named write_file, and the user was asked which file to save to)."""
    text = question(messages)
    return bool(_SAVE_WORDS.search(text) or (_WRITE_WORDS.search(text) and _FILE_WORDS.search(text)))


_OBJECT_BEFORE = re.compile(r"(?:把|将)[^\s,，。;；]{0,12}$")
_CONNECTIVE_END = re.compile(
    r"(?:[,，;；:：.!?。！？]|\band(?:\s+then)?|\bthen|然后|并且|并|再|之后|后|[算做读查写弄](?:完|好))"
    r"\s*(?:单独|另外|分别|统一|一起|全部|also|separately)?\s*$",
    re.IGNORECASE,
)
_ASKING_WORDS = re.compile(r"(?:\s*(?:请|麻烦|帮我|给我|帮忙|顺便|顺手|\bplease\b))+\s*$", re.IGNORECASE)
"""Words that ask, at the end of what comes before a saving clause ("…每期要还多少？算好帮我记到 分期.txt 里"): not
part of the clause before it."""
_CLAUSE_WORDS = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_]+")


def before_saving(text: str) -> str | None:
    """What a request asks for before the clause that saves or writes its outcome, when it asks for something
    first: "Work out 7.5% sales tax on 348.80 and save the amount in tax.txt" → "Work out 7.5% sales tax on
    348.80"; "算一下 468 乘以 0.85 再加 63 是多少，然后把结果写进 结果.txt" → "算一下 468 乘以 0.85 再加 63 是多少".
    None when the request starts with the saving ("Write a haiku and save it"), the saving clause does not follow a
    connective ("I want you to write …"), or what comes before it is under two words (or four Chinese characters).
    The end of a sentence is a connective too, and so is "算完" (done calculating): a sum asked in one sentence and
    saved in the next, and a Chinese "…是多少？算完把结果记到 x.txt 里", were written to the file before anything was
    calculated (agent-mine-v4, a tuning set, 2026-12-05). An adverb between the connective and the saving ("，另外存到
    摘录.txt") is the saving clause's; a saving word that follows no connective ("what would we save per month? Note
    the amount in budget.txt") gives way to a later one (agent-mine-v6, a tuning set, 2026-12-05: such requests had
    their amount written before it was computed, and a line appended to the file to be read from).

    The turn's first decision is made on that part first (the user's order of the steps): on the whole request the
    named file drew the decision to the file tools, and the 0.5B model wrote ``"468 * 0.85 + 63 ="`` to the file
    before calculating."""
    saving = sorted({m.start() for words in (_SAVE_WORDS, _WRITE_WORDS) for m in words.finditer(text)})
    for at in saving:
        head = _OBJECT_BEFORE.sub("", text[:at].rstrip()).rstrip()
        head = _ASKING_WORDS.sub("", head).rstrip()
        if not head:
            return None  # the request starts with the saving
        connective = _CONNECTIVE_END.search(head)
        if connective is None:
            continue  # not a saving clause of its own ("what would we save per month?"): a later one may be
        head = head[: connective.start()].rstrip(" ,，;；")
        return head if _a_clause(head) else None
    return None


def _a_clause(text: str) -> bool:
    """``text`` is a part of a request to decide on its own: two words or more (or four Chinese characters)."""
    words = _CLAUSE_WORDS.findall(text)
    cjk = sum(1 for w in words if _CJK.fullmatch(w))
    return len(words) - cjk >= 2 or cjk >= 4


_SPELLED_OUT = re.compile(r"[:：]\s*")


def what_to_write(text: str) -> str | None:
    """What a request that changes a named file spells out to be written, after a colon that follows the change:
    "在 浇花记录.txt 最后加一行：今天的日期，后面写“龟背竹浇透了”" → "今天的日期，后面写“龟背竹浇透了”"; "Add a line to
    journal.md: today's date, then 'ran 5k'" → "today's date, then 'ran 5k'". None when no file is named before the
    colon, no change is asked before it, or what follows is under two words (or four Chinese characters). The
    turn's first decision is made on it first, among the tools that change nothing (:meth:`LocalAdapter._tool_step`):
    the date it asks for is the time tool's (on the whole request the named file narrowed the decision to the file
    tools, and the line was read, never written: agent-mine-v7, a tuning set, 2026-12-06)."""
    for colon in _SPELLED_OUT.finditer(text):
        head, rest = text[: colon.start()], text[colon.end() :].strip()
        if not named_paths(head) or not _asks_a_change(head):
            continue
        return rest if _a_clause(rest) else None
    return None


_CONNECTIVE = re.compile(
    r",(?!\d)|[，;；:：!?。！？]|\.(?=\s|$)|\band(?:\s+then)?\b|\bthen\b|然后|并且|并|再|之后|接着", re.IGNORECASE
)


def to_change(paths: Sequence[str], text: str) -> list[str]:
    """Of the ``paths`` a request names, those whose own clause (:func:`clause_of`) asks for a change
    (:data:`_CHANGE_WORDS`): what a tool that changes things may be given; all of them when none does.
    A request to pick lines out of one named file and save them in another had a line appended to the file to read
    from (agent-mine-v6, a tuning set, 2026-12-05): "把 周会.md 里的待办挑出来，存到 待办.txt" changes 待办.txt only; in
    one clause, the file a change word comes before (:func:`_lead_of`: "…里的问题抄到 清单.txt", agent-mine-v7)."""
    changed = [p for p in paths if _asks_a_change(clause_of(text, [p]))]
    if len(changed) > 1:  # one clause names both: the file the change word comes before
        changed = [p for p in changed if _asks_a_change(_lead_of(text, p, paths))] or changed
    return changed or list(paths)


def sources_first(paths: Sequence[str], text: str) -> list[str]:
    """Of the ``paths`` a request names, the files to read from before the change: those it does not ask to change
    (:func:`to_change`) that it names before the first one it does. "把 提纲.md 里打了★的问题抄到 清单.txt": 提纲.md,
    which the turn's first step reads — offered both tools, the 1.5B model wrote the list first, from nothing, and
    to the file to copy from (agent-mine-v7, a tuning set, 2026-12-06). Empty when it asks to change all of them or
    none, or names a changed file first ("Rename a.txt to b.txt")."""
    changed = to_change(paths, text)
    if len(changed) == len(paths):
        return []
    lowered = text.lower()
    at = {p: lowered.find(p.lower()) for p in paths}
    first_change = min(at[p] for p in changed)
    return [p for p in paths if p not in changed and 0 <= at[p] < first_change]


def _lead_of(text: str, path: str, paths: Sequence[str]) -> str:
    """The part of ``path``'s clause (:func:`clause_of`) up to it, from the end of the last of the other ``paths``
    before it: "把 提纲.md 里打了★的问题单独抄到 追问清单.txt" leads to 追问清单.txt with "里打了★的问题单独抄到", to
    提纲.md with "把"."""
    clause = clause_of(text, [path])
    lowered = clause.lower()
    at = lowered.find(path.lower())
    if at < 0:
        return clause
    start = 0
    for other in paths:
        where = lowered.rfind(other.lower(), 0, at)
        if other != path and where >= 0:
            start = max(start, where + len(other))
    return clause[start : at + len(path)]


def clause_of(text: str, names: Sequence[str]) -> str:
    """The clause of the request ``text`` that writes the first of ``names`` (a file's path) found in it, from the
    connective before it to the one after it; the whole of ``text`` when it writes none. A call on a named file
    takes its optional numbers from that clause only: "打开 a.md，把各项加起来，看看比5万的上限多多少" would read
    ``a.md`` from line 50000, as a budget in a later clause did in agent-mine-v4 (a tuning set, 2026-12-05)."""
    lowered = text.lower()
    found = [(at, name) for name in names if (at := lowered.find(name.lower())) >= 0]
    if not found:
        return text
    at, name = min(found)
    starts = [m.end() for m in _CONNECTIVE.finditer(text, 0, at)]
    after = _CONNECTIVE.search(text, at + len(name))
    return text[starts[-1] if starts else 0 : after.start() if after else len(text)]


def _strings_in(value: Any) -> list[str]:
    """The strings an argument value holds, nested ones too."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings_in(v)]
    return []


def what_remains(text: str, calls: Sequence[tuple[str, dict[str, Any]]]) -> str | None:
    """The part of the request ``text`` after the clause the turn's ``calls`` served: the text after the first
    connective that follows the last place the request writes one of their string arguments (a path as given,
    its base name, a query). "Open receipts/may.csv and add up what I spent" after ``read_file`` on it → "add up
    what I spent"; "打开 花销/十月.csv，把支出加起来" → "把支出加起来". None when the request writes none of them, or
    what follows is under two words (or four Chinese characters)."""
    lowered = text.lower()
    end = -1
    for _, args in calls:
        for value in _strings_in(args):
            value = value.strip().lower()
            for form in {value, value.rsplit("/", 1)[-1]}:
                if len(form) >= 2 and (at := lowered.rfind(form)) >= 0:
                    end = max(end, at + len(form))
    if end < 0:
        return None
    connective = _CONNECTIVE.search(text, end)
    if connective is None:
        return None
    rest = text[connective.end() :].strip(" ,，;；:：")
    return rest if _a_clause(rest) else None


_ASKED_VERBS = (
    r"find|get|tell|show|give|calculate|compute|work out|analy[sz]e|identify|check|look up|search|book|reserve|send|"
    r"create|list|estimate|convert|play|fetch|retrieve|predict|determine|provide|suggest|recommend|schedule|compare|"
    r"translate|summari[sz]e|add|set|update|delete|remove|open|read|write|save|order|buy|cancel|track|measure|count|"
    r"locate|plan|make"
)
_WH_WORDS = r"what|how|when|where|which|who|whom|whose|why"
_PART_BREAK = re.compile(
    r"(?<=[.!?;])\s+(?=[\"'“(]?[A-Z\u3400-\u9fff])|[。！？；]+"
    rf"|(?i:,?\s+and\s+(?:also\s+|then\s+)?(?=(?:{_WH_WORDS}|{_ASKED_VERBS})\b))"
    r"|[，,]\s*(?=然后|并且|另外|还有|顺便|同时|再帮|再查|再看|再算)"
)
"""Where a request's parts meet: a sentence's end (before a capital or a Chinese character), "and" before a question
word or a verb that asks for something ("…lose 500 calories and how much water…", "…image and analyze the
sentiment…"), a Chinese comma before 然后, 另外, 顺便…"""
_ASKING_PART = re.compile(
    rf"[?？]|^\W*(?i:(?:please|kindly|also|lastly|finally|then|and|now)\W+)*(?i:(?:{_WH_WORDS}|{_ASKED_VERBS})\b)"
    r"|(?i:\b(?:can you|could you|would you|will you|i need|i want|i'd like|i would like|help me|let me know)\b)"
    r"|帮|请|查|看看|告诉|给我|多少|什么|哪|吗"
)
"""A part of a request that asks for something: a question, a question word or a verb that asks at its start, or
words that ask anywhere in it ("Lastly, my friend is joining from Tokyo and I need to know the time difference")."""


def request_parts(text: str) -> list[str]:
    """The parts of a request that asks several things (:data:`_PART_BREAK`), each of two words or more that asks
    for something (:data:`_ASKING_PART`); none when it asks one. "How many steps do I need to walk to lose 500
    calories and how much water do I need if I exercise for 2 hours?" asks two; "What's the weather in Paris,
    France?" one."""
    parts = [p.strip() for p in _PART_BREAK.split(text)]
    asking = [p for p in parts if _a_clause(p) and _ASKING_PART.search(p)]
    return asking if len(asking) > 1 else []


def asking_only(conversation: Sequence[dict[str, Any]], part: str) -> list[dict[str, Any]]:
    """``conversation`` with its last message, the request, read as ``part`` of it."""
    return [*conversation[:-1], {**conversation[-1], "content": part}]


_CHANGE_WORDS = re.compile(
    r"\b(?:save[ds]?|saving|store|write|writes|writing|put|record|export|create|add|append|insert|update|edit|"
    r"change|modify|replace|rename|move|copy|delete|remove|fill|fix|note down|jot|generate|draft|compose|output|dump|"
    r"overwrite|clear|make (?:a|an|me))\b|保存|存到|存入|存为|存成|存下|写入|写到|"
    r"写进|写上|写成|写下|写一|写个|写份|写篇|记到|记下|记录到|建一|新建|创建|生成|添加|加上|追加|插入|更新|编辑|修改|改成|"
    r"改为|改正|修正|替换|重命名|移动|复制|删除|删掉|填入|填上|导出|放进|放到|放入|抄到|抄进|抄成|誊到|整理到|整理进|整理成|"
    r"汇总到|汇总进|汇总成|列到|列进|贴到|贴进|粘贴到|记在|记进|写在|加一行|加一条|加一句|加一段|加一项|补一行|补一条|补上|"
    r"补充到|记一笔|记上|划掉|勾掉|标记为|标成|(?<![参更])加个(?![班油]|微信|好友)|合并(?:成|到|为|起来|单元格|一下)",
    re.IGNORECASE,
)


_WH_QUESTION = re.compile(
    rf"(?:^|(?<=[.!?;:]\s)|(?<=[。！？；：]))\s*(?:{_WH_WORDS})\b(?:[^.!?\n]|\.(?=\S))*\?"
    r"|(?:^|(?<=[.!?;:]\s)|(?<=[。！？；：]))(?:(?!帮|请|能不能|可不可以|能否|可以|麻烦)[^。！？；：.!?\n])*"
    r"(?:哪|什么|谁|几|多少|为什么|是不是)(?:(?!帮|请|能不能|可不可以|能否|可以|麻烦)[^。！？；：.!?\n])*[?？]",
    re.IGNORECASE,
)
"""A question that asks for something to be told (which, what, when…; 哪, 什么, 谁…, up to its question mark),
not done: "Which release added dark mode?", "哪一版加上了夜间模式？". Not "Can you save …?" or "能帮我存到 a.txt
吗？"."""


def _asks_a_change(text: str) -> bool:
    """``text`` holds a change word (:data:`_CHANGE_WORDS`) outside its questions that ask to be told
    (:data:`_WH_QUESTION`)."""
    return _CHANGE_WORDS.search(_WH_QUESTION.sub(" ", text)) is not None


def asks_for_a_change(messages: Sequence[MetonaMessage]) -> bool:
    """The current request asks for something to be written, saved or changed (any of :data:`_CHANGE_WORDS`) outside
    its questions that ask to be told something (:data:`_WH_QUESTION`). A tool that :func:`names_its_file` is
    offered on a named file only then: a question about what a named file says drew the 0.5B model's write_file,
    which replaced the file with the question; a question about which release brought a feature, the feature's
    name a change word, drew an append of a made-up line to the project's changelog (agent-mine-v5, a tuning set,
    2026-12-05)."""
    return _asks_a_change(question(messages))


def chinese(messages: Sequence[MetonaMessage]) -> bool:
    """The current request is written in Chinese (the language of what the provider itself says)."""
    return bool(_CJK.search(question(messages)))


def which_file(messages: Sequence[MetonaMessage]) -> str:
    """The question back when a write names no file, in the request's language."""
    if chinese(messages):
        return "要保存到哪个文件？请告诉我文件名（例如 notes.md）。"
    return "Which file should I save this to? Tell me its name (for example notes.md)."


ARGUMENT_OVERHEAD = 64
"""Tokens of a call's arguments beyond its strings' declared lengths: keys, punctuation, numbers, booleans."""


def argument_budget(parameters: dict[str, Any], said: int = 0) -> int:
    """The most tokens a call's arguments may take: :data:`ARGUMENT_TOKENS`, or less when every string the tool
    declares is bounded (an enum, or ``at most N characters`` in the hints the tool registry appends to a field's
    description from its ``maxLength``) and every array too (``at most N items``): :data:`ARGUMENT_OVERHEAD` plus
    those lengths (a token is at least a character). The calculator's ``expression`` (at most 500 characters) was
    written by the arguments model as ``1/4 * 2 * 3 * 4 * …`` — a count, which no repeat guard sees — for 4096
    tokens (400 s) before the call was dropped. (The grammar could bound the string itself, but openvino-genai then
    takes ~6 s to compile it.)

    A tool with an unbounded string but none that holds a text (:func:`holds_text`: a file's content, a message's
    body) gets :data:`SHORT_ARGUMENTS` plus half the ``said`` characters of the conversation (what a value copied
    from it can take): a weather API's ``url`` for "¿Podrías obtener los datos del tiempo para la Ciudad de
    México?" was written as ``…?latitude=19.43&longitude=-99.14&current=temperature&current=precipitation&…`` for
    the 4096 tokens (~10 minutes). The longest arguments of 1081 recorded calls of the tuning half were 653
    characters (a content item's text) and, without a text, 425."""

    def most(spec: Any) -> int | None:
        if not isinstance(spec, dict):
            return 0
        hints = _HINTS.search(str(spec.get("description") or ""))
        hint = hints.group(1) if hints else ""
        if spec.get("enum"):
            return max(len(json.dumps(v, ensure_ascii=False)) for v in spec["enum"])
        kind = spec.get("type")
        if kind == "string":
            found = _MOST_CHARS.search(hint)
            return int(found.group(1)) if found else None
        if kind == "array":
            found, each = _MOST_ITEMS.search(hint), most(spec.get("items"))
            return int(found.group(1)) * (each + 2) if found and each is not None else None
        if kind == "object" or "properties" in spec:
            parts = [most(v) for v in (spec.get("properties") or {}).values()]
            return None if None in parts else sum(p or 0 for p in parts) + 4 * len(parts)
        return 0  # numbers, booleans: within the overhead

    total = most(parameters)
    if total is not None:
        return min(ARGUMENT_TOKENS, ARGUMENT_OVERHEAD + total)
    return ARGUMENT_TOKENS if holds_text(parameters) else min(ARGUMENT_TOKENS, SHORT_ARGUMENTS + said // 2)


SHORT_ARGUMENTS = 384
"""Tokens for the arguments of a tool that holds no text (:func:`argument_budget`), beyond the conversation's."""

_TEXT_WORDS = frozenset(
    "content contents text body code source script markdown html document essay article story letter email message "
    "description summary note notes patch diff data prompt lyrics poem transcript template instructions comment "
    "post caption statement question answer reply sql".split()
)
"""Words that, last in an argument's name, say it holds a text of any length (``content``, ``newText``,
``message_body``; not ``Content-Type``)."""


def holds_text(parameters: dict[str, Any]) -> bool:
    """Some string the tool declares, at any depth, is named as a text (:data:`_TEXT_WORDS`, its name's last
    word)."""

    def walk(spec: Any, key: str) -> bool:
        if not isinstance(spec, dict):
            return False
        words = _name_words(key)
        if spec.get("type") == "string" and not spec.get("enum") and words and words[-1] in _TEXT_WORDS:
            return True  # its name's last word: newText, message_body; not Content-Type
        if walk(spec.get("items"), key):
            return True
        return any(walk(v, k) for k, v in (spec.get("properties") or {}).items())

    return walk(parameters, "")


_MOST_CHARS = re.compile(r"\bat most (\d+) characters\b")
_MOST_ITEMS = re.compile(r"\bat most (\d+) items\b")


def cut_notice(tool: str, finish: object, messages: Sequence[MetonaMessage], budget: int = ARGUMENT_TOKENS) -> str:
    """What the user is told when a call's arguments were cut short (``finish`` ``length``: the token limit,
    ``budget``; ``loop``: the loop guard; ``runaway``: a number of more digits than a double holds,
    :func:`read_arguments`) or could not be read, so the call was not made; in the request's language."""
    if chinese(messages):
        why = {
            "length": f"参数超过了 {budget} 个词元的上限",
            "loop": "参数陷入了重复循环",
            "runaway": "参数里的一个数字写个不停",
        }
        return f"（没有调用 {tool}：{why.get(str(finish), '参数不完整')}，以下是直接回答。）"
    why = {
        "length": f"its arguments ran past the {budget}-token limit",
        "loop": "its arguments fell into a repeating loop",
        "runaway": "a number in its arguments ran on without end",
    }
    return f"(I did not call {tool}: {why.get(str(finish), 'its arguments were incomplete')}. Answering directly.)"


def question(messages: Sequence[MetonaMessage]) -> str:
    """The current request: the last user message ("" when there is none)."""
    start = turn_start(messages)
    return messages[start - 1].content if start > 0 else ""


_ZH_STOP = "\\s「」“”\"'‘’，。、；：？！,;:?!()（）"
"""What ends a Chinese word as :data:`_ZH_FOLDER` and :data:`_ZH_SLASHED` read one (spaces, quotes, punctuation,
brackets); a folder's name also ends at ``.`` and 《》, a folder's path does not end at ``.``."""
_ZH_FOLDER = re.compile(
    rf"(?:^|(?<=[{_ZH_STOP}.《》]))"
    rf"([^{_ZH_STOP}.《》]+?)[」”\"'’]?\s*(?:这个|那个)?\s*(?:文件夹|目录)"
)
"""A Chinese "X 文件夹" / "X 目录": X from the start of its word (the same matches as from any character, found in
linear time: from every character, a pasted page of Chinese took seconds)."""
_EN_FOLDER = re.compile(
    r"\b(?:in|into|to|inside|under|within|from)\s+(?:the\s+|my\s+|our\s+|a\s+)?[\"'`“‘]?([\w.\-/\u3400-\u9fff]+?)[\"'`”’]?"
    r"\s+(?:folder|directory|dir)\b",
    re.IGNORECASE,
)


_ZH_NOT_A_FOLDER = (
    "根", "当前", "本", "同一", "上级", "上一级", "父", "子", "新", "新建", "这个", "那个", "该", "此",
    "工作区", "项目", "工程", "主", "某个", "一个", "文件", "对应", "相应", "同",
)  # fmt: skip
_EN_NOT_A_FOLDER = frozenset(
    "current this that same root parent new home workspace project working top base default other another its "
    "their his her one each every any some which what your my our the a an".split()
)
"""Words that say which folder rather than name it ("the root folder", "当前目录", "项目根目录", "同一个文件夹"): the
file stays as the request names it."""


_ZH_SLASHED = re.compile(
    rf"(?:在|到|往|进|去)\s*[「“\"'‘]?([^{_ZH_STOP}]{{1,64}}?)[/\\]?[」”\"'’]?\s*(?:这个|那个)?\s*"
    r"(?:下面|下边|底下|里面|里头|下|里|中)"
)
_EN_SLASHED = re.compile(
    r"\b(?:in|into|inside|under|within)\s+(?:the\s+|my\s+|our\s+)?[\"'`“‘]?"
    r"((?:[\w.\-\u3400-\u9fff]+[/\\])+[\w\-\u3400-\u9fff]+(?:\.[\w\-\u3400-\u9fff]+)*)[/\\]?[\"'`”’]?(?=[\s,;:!?]|\.(?!\w)|$)",
    re.IGNORECASE,
)
"""A folder named by its path, without the word folder ("在 工作/周计划 下面新建一个 第49周.md", "save it in
docs/2024"): a path with a folder in it that names no file (:func:`_is_file_name`), after a word that says where."""
_ABBREVIATION = re.compile(r"[A-Z0-9]{1,4}(?:[/\\][A-Z0-9]{1,4})+|[a-z]{1,2}/[a-z]{1,2}|and/or")
"""Slashed words that are no folder: "TCP/IP", "I/O", "km/h", "and/or"."""


def _slashed_spans(text: str) -> list[tuple[str, int, int]]:
    """[(folder, start, end)] of the folders a request names by their path (:data:`_ZH_SLASHED`,
    :data:`_EN_SLASHED`): not a file's path, a number's, nor an abbreviation's (:data:`_ABBREVIATION`)."""
    spans = [(m.group(1), m.start(), m.end()) for m in (*_ZH_SLASHED.finditer(text), *_EN_SLASHED.finditer(text))]
    return [
        (f, a, b)
        for f, a, b in spans
        if re.search(r"[/\\]", f)
        and re.search(r"[^\W\d_]", f)
        and not _is_file_name(f)
        and not _ABBREVIATION.fullmatch(f)
    ]


def named_folder(text: str) -> str | None:
    """The one folder a request names as where its file is ("在 日记 文件夹里建一个 a.md", "「项目资料」这个文件夹",
    "put it in the drafts folder"), without a trailing ``/``; None when it names none or several, or says which
    folder without naming it (:data:`_EN_NOT_A_FOLDER`: "the current folder", "项目根目录")."""
    found = _folder_spans(text)
    return found[0][0] if found else None


def _folder_spans(text: str) -> list[tuple[str, int, int]]:
    """[(folder, start, end)] of :func:`named_folder`'s one folder (every place the request names it), or []."""
    spans = [(_zh_folder_name(m.group(1)), m.start(), m.end()) for m in _ZH_FOLDER.finditer(text)]
    spans += [(m.group(1), m.start(), m.end()) for m in _EN_FOLDER.finditer(text)]
    spans = spans or _slashed_spans(text)  # by its path only when no folder word names one
    spans = [(f.strip().rstrip("/\\"), a, b) for f, a, b in spans if f and f.strip().rstrip("/\\")]
    folders = {f for f, _, _ in spans}
    if len(folders) != 1:
        return []
    folder = next(iter(folders))
    if folder in (".", "..", "~") or folder.lower() in _EN_NOT_A_FOLDER:
        return []
    if _CJK.search(folder) and _says_which(folder):
        return []
    return spans


def _says_which(folder: str) -> bool:
    """A Chinese "folder" that says which folder rather than names it: one of :data:`_ZH_NOT_A_FOLDER`, or a name
    ending in one of two characters or more ("项目根" too: a one-character ending counts after another of them, so
    "合同", "日本", "样本" stay names)."""
    for word in _ZH_NOT_A_FOLDER:
        if folder == word or (folder.endswith(word) and (len(word) >= 2 or _says_which(folder[: -len(word)]))):
            return True
    return False


def _zh_folder_name(word: str) -> str:
    """A folder's name glued to the words before it ("在日记" → ``日记``): from after the last of
    :data:`ZH_BEFORE_NAME`."""
    return word[_after_lead_words(word) :]


_LIST_JOIN = r"\s*(?:,|，|、|\band\b|和|与|及)\s*"
_CLAUSE_BREAK = re.compile(
    r"[，,。;；!?！？]|\.\s|\b(?:then|and|after|before)\b|然后|接着|之后|以后|再|并|和|还有|另外"
)


def in_folder(paths: Sequence[str], text: str) -> list[str]:
    """``paths`` with each bare file name (no folder of its own) that the request names in the same clause as its
    one folder (:func:`named_folder`) put in that folder: the request said where the file is ("在 日记 文件夹里建一个
    2024-12-03.md" → ``日记/2024-12-03.md``; it was written to the workspace's root). A name in another clause
    ("read README.md and list the docs folder") stays as it is."""
    spans = _folder_spans(text)
    if not spans:
        return list(paths)
    folder = spans[0][0]

    def near(path: str) -> bool:
        at = text.find(path)
        if at < 0:
            return False
        for _, a, b in spans:
            between = text[at + len(path) : a] if at + len(path) <= a else text[b:at] if b <= at else ""
            for other in paths:  # "a.md, b.md and c.md in the docs folder": a list of names is one clause
                between = re.sub(_LIST_JOIN + re.escape(other), " ", between, flags=re.IGNORECASE)
            if not _CLAUSE_BREAK.search(between):
                return True
        return False

    out = [f"{folder}/{p}" if not re.search(r"[/\\]", p) and p != folder and near(p) else p for p in paths]
    return list(dict.fromkeys(out))


def request_paths(messages: Sequence[MetonaMessage]) -> list[str]:
    """The file paths the current request names (the conversation's :func:`seen_files` recognised too), a bare
    name in the folder the request names for it (:func:`named_folder`)."""
    asked = question(messages)
    return in_folder(named_paths(asked, seen_files(messages)), asked)


def turn_outcomes(messages: Sequence[MetonaMessage]) -> list[tuple[str, dict[str, Any], bool | None]]:
    """The current turn's calls with whether each succeeded (None: no result yet), in order."""
    start = turn_start(messages)
    results = {m.tool_result.tool_call_id: m.tool_result.success for m in messages[start:] if m.tool_result}
    return [(c.name, dict(c.args), results.get(c.id)) for m in messages[start:] for c in m.tool_calls or ()]


def _paths_given(args: dict[str, Any]) -> set[str]:
    return {_bare(v) for v in args.values() if isinstance(v, str)}


def _paths_worked_on(messages: Sequence[MetonaMessage]) -> set[str]:
    """The files the turn's successful results say they worked on (a result's own :data:`PATH_ARGUMENT`): a read
    of a name that was not there reads the one file it can mean and gives that file's path."""
    results = (m.tool_result for m in messages[turn_start(messages) :] if m.role == "tool" and m.tool_result)
    return {
        _bare(r.result[PATH_ARGUMENT])
        for r in results
        if r.success and isinstance(r.result, dict) and isinstance(r.result.get(PATH_ARGUMENT), str)
    }


def untouched_paths(messages: Sequence[MetonaMessage]) -> list[str]:
    """The files the request names that no call of the turn was given (as an argument's whole value) or worked on
    (:func:`_paths_worked_on`), a failed call not counted: a failed read of the file to write ("no such file")
    leaves it to be written."""
    given = {p for _, args, ok in turn_outcomes(messages) if ok is not False for p in _paths_given(args)}
    given |= _paths_worked_on(messages)
    return [p for p in request_paths(messages) if _bare(p) not in given]


def failed_on(messages: Sequence[MetonaMessage], paths: Sequence[str]) -> set[str]:
    """The tools whose calls in the current turn failed on one of ``paths``: not offered for them again."""
    wanted = {_bare(p) for p in paths}
    return {name for name, args, ok in turn_outcomes(messages) if ok is False and _paths_given(args) & wanted}


def known_paths(messages: Sequence[MetonaMessage]) -> list[str]:
    """The files a call after a tool result may work on: those the request names and those the turn's results
    named (:func:`seen_files`). After a note lookup the 0.5B model read a file whose name it made of the
    request's words."""
    return list(dict.fromkeys([*request_paths(messages), *seen_files(messages)]))


_OPEN_WORDS = re.compile(r"\b(?:open|read)\b|打开|点开|读一下|读读|读取", re.IGNORECASE)


def to_open(messages: Sequence[MetonaMessage]) -> list[str]:
    """The files the turn's results named (a search's matches, a listing's entries: :func:`seen_files`) when the
    request asks to open or read a file it does not name and no call of the turn was given one of them: the next
    step reads one of them (:func:`unfinished`'s way: the tools that take a file, no ``answer``). "Which file
    has the trip's details? Open it and tell me …" found the file and was answered without it; a request to list a
    folder and open the newest file in it was answered from the listing (agent-mine-v4, a tuning set, 2026-12-05).
    Not when what is opened is a folder ("open the docs folder"). A request that asks no opening: those of the
    files that what it asks after the served part asks about (:func:`asked_of`)."""
    asked = question(messages)
    opening = [m for m in _OPEN_WORDS.finditer(asked) if not _FOLDER_WORDS.search(asked[m.end() : m.end() + 25])]
    if request_paths(messages):
        return []
    seen = seen_files(messages[turn_start(messages) :])
    files = [p for p in seen if not any(q != p and re.split(r"[/\\]", q)[-1] == p for q in seen)]
    given = {p for _, args, _ in turn_outcomes(messages) for p in _paths_given(args)} | _paths_worked_on(messages)
    if any(_bare(p) in given for p in files):
        return []
    if not opening:
        return asked_of(asked, turn_calls(messages), files)
    return files


TOLD_OF_FILES = 3
"""Most files a turn's results named for the next step to read one of them when the request asks what it says
without naming it or asking to open it (:func:`asked_of`)."""
_WHICH_OR_FOUND = re.compile(r"\bwhich\b|\bwhere\b|\bfind\b|\bfound\b|哪|找到", re.IGNORECASE)


def asked_of(text: str, calls: Sequence[tuple[str, dict[str, Any]]], files: Sequence[str]) -> list[str]:
    """Of the ``files`` the turn's results named, those that what the request ``text`` asks after the part the
    turn's ``calls`` served (:func:`what_remains`) asks to be told about, when it asks no change
    (:data:`_CHANGE_WORDS`) nor which files: the ones whose name it writes a word of ("List the recipes folder and
    tell me what's in the pancake one" → ``recipes/pancakes.md``), else, when what it asks last asks neither which,
    where, what was found, what a folder holds (:func:`asks_what_it_holds`: the listing says that) nor a quantity
    (:func:`asks_a_quantity`: how many there are), every one of at most :data:`TOLD_OF_FILES` ("Find the file
    that mentions the dentist appointment and tell me what time it is at" had been answered from the matched line's
    "moved, see calendar"; requests written for this, 2026-12-05). :func:`to_open` reads one of them next."""
    rest = what_remains(text, calls)
    if rest is None or _CHANGE_WORDS.search(rest) or asks_which_files(rest):
        return []
    words = _naming_words(rest)
    named = [f for f in files if _named_file(f, words, rest)]
    if named:
        return named
    parts = [part for part in _CONNECTIVE.split(rest) if part.strip()]
    last = parts[-1] if parts else rest  # what is asked last
    told = _WHICH_OR_FOUND.search(last) or asks_what_it_holds(last) or asks_a_quantity(last)
    if told or len(files) > TOLD_OF_FILES:
        return []
    return list(files)


def _named_file(path: str, words: set[str], text: str) -> bool:
    """``text`` (its naming ``words``) writes a word of the file's name: "the pancake one" → ``pancakes.md``,
    "第三季度那份" → ``第三季度.md``."""
    stem = re.split(r"[/\\]", path)[-1].rsplit(".", 1)[0]
    own = _naming_words(stem)
    cjk = "".join(_CJK.findall(stem))
    return bool(own & words) or (len(cjk) >= 2 and cjk in text)


def as_the_clause_asks(tools: Sequence[MetonaToolDef], text: str, paths: Sequence[str]) -> list[MetonaToolDef]:
    """Of the ``tools`` for a step on a file the turn has not yet worked on (``paths``, :func:`untouched_paths`),
    those its own clause of the request (:func:`clause_of`) asks for: the tools that change things
    (:func:`changes_things`) when it asks for a change (:data:`_CHANGE_WORDS`, outside a question that asks to be
    told, :data:`_WH_QUESTION`), the others when it does not; all of them when none fits. After "读一下 todo.md，
    把没做完的事情单独存到 pending.md 里" had read todo.md, the 0.5B model read pending.md at p 0.99 and the list was
    never saved; "What time is it now? Add it as a line to timelog.txt", after the time, read timelog.txt
    (requests written for this, 2026-12-05)."""
    change = _asks_a_change(clause_of(text, paths))
    fit = [t for t in tools if changes_things(t) == change]
    return fit or list(tools)


def target_paths(messages: Sequence[MetonaMessage]) -> list[str]:
    """The files a call that :func:`names_its_file` may work on: those the request names that no call of the turn
    was given yet ("read a.txt and save a summary to b.txt": after the read, b.txt only, never the file read),
    else every file it names."""
    return untouched_paths(messages) or request_paths(messages)


def unfinished(messages: Sequence[MetonaMessage]) -> bool:
    """The turn has made calls, and the request names a file that none of them was given (``save the result to
    answer.txt`` after the calculator; ``then read logs/app.log`` after listing the folder): a step on that file
    is due, so the next decision is offered the tools that :func:`takes_a_file` (one that already succeeded in the
    turn too: "read a.txt and b.txt"), without :data:`ANSWER` and without the p ≥ :data:`NEXT_TOOL_MIN_P` bar,
    and the call's path is one of those files (:func:`target_paths`). Without a tool that takes a file, the next
    decision is the usual one. Not after a failed call that named none of those files (``12% * 250`` refused
    by the calculator was written to the named file as it was), nor before any call of the turn succeeded."""
    outcomes = turn_outcomes(messages)
    if not outcomes or not any(ok for _, _, ok in outcomes):
        return False
    untouched = untouched_paths(messages)
    _, args, ok = outcomes[-1]
    if ok is False and not _paths_given(args) & {_bare(p) for p in untouched}:
        return False
    return bool(untouched)


def _path_argument(tool: MetonaToolDef) -> tuple[dict[str, Any], bool] | None:
    """The tool's :data:`PATH_ARGUMENT` when it is a string: (its schema, whether it is required); else None."""
    schema = tool.parameters.model_dump(mode="json", exclude_none=True)
    spec = (schema.get("properties") or {}).get(PATH_ARGUMENT)
    if not isinstance(spec, dict) or spec.get("type") != "string":
        return None
    return spec, PATH_ARGUMENT in (schema.get("required") or ())


TEXT_MIN_CHARS = 1000
"""A string argument declared no shorter than this (or unbounded) may hold a text the call writes
(:func:`text_argument`)."""


def text_argument(tool: MetonaToolDef, schema: dict[str, Any]) -> str | None:
    """The one argument of ``schema`` (the tool's arguments schema) that holds a text the call writes, when the
    tool may change things (:func:`may_change`): a required string with no enum
    and no format, that names no file (:func:`_names_a_file`), whose declaration bounds it to no fewer than
    :data:`TEXT_MIN_CHARS` characters if at all — write_file's ``content``, a ticket's ``body``. None when there is
    not exactly one. After a turn's results it is written first, as text (:func:`text_request`)."""
    if not may_change(tool):
        return None
    declared = tool.parameters.model_dump(mode="json", exclude_none=True)
    required = set(schema.get("required") or ())
    found = []
    for key, spec in (schema.get("properties") or {}).items():
        if key not in required or spec.get("type") != "string" or spec.get("enum") or _names_a_file(key):
            continue
        own = _spec(declared, key)
        if own.get("format") or own.get("pattern") or "const" in spec:
            continue
        most = _MOST_CHARS.search(" ".join(_hint_items(str(own.get("description") or ""))))
        if most and int(most.group(1)) < TEXT_MIN_CHARS:
            continue
        found.append(key)
    return found[0] if len(found) == 1 else None


def text_request(tool: MetonaToolDef, key: str, messages: Sequence[MetonaMessage]) -> str:
    """What the model is asked for the text of ``key`` (:func:`text_argument`), after the request and the turn's
    results, in the request's language. Written as a JSON string after the results, the 1.5B model copied the
    request and its "Done so far" list into write_file's ``content``, or wrote that the file was saved
    (agent-mine-v7, a tuning set, and requests written for this, 2026-12-06)."""
    if chinese(messages):
        return (
            f"只写出 {tool.name} 的 {key} 本身（请求要写进去的文字），根据这些结果，名称和数字照结果原样写出。"
            "不要别的话。"
        )
    return (
        f"Write only the {key} of {tool.name} itself (the text the request wants written), from these results, "
        "with names and numbers exactly as they are written there. Nothing else."
    )


TEXT_PREFIX = "```text\n"
"""How the reply with a call's text begins (:func:`text_request`): inside a fence of plain text."""


def fenced_text(written: str, key: str) -> str:
    """The text written after :data:`TEXT_PREFIX`, up to the fence that closes it (what follows is talk about it),
    without a wrapping of its own (:func:`unfenced`); where it is the call itself, an object of arguments (bare or
    as ``write_file({…})``) with ``key`` a string, that string. Asked for write_file's ``content``, the 1.5B model
    wrote ``{"path": "待办.txt", "content": "…"}`` about one time in three (requests written for this, 2026-12-06)."""
    written = re.sub(r"\A\s*```[\w+-]*[ \t]*\n", "", written)  # a fence opened again at the start
    text = unfenced(written.split("```", 1)[0])
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end and start <= 40:
        try:
            call = json.loads(text[start : end + 1])
        except ValueError:
            return text
        if isinstance(call, dict) and isinstance(call.get(key), str):
            return unfenced(call[key])
    return text


_WRAPPED = re.compile(
    r"\A[^`]{0,80}?(?:```[\w+-]*[ \t]*\n(?P<fenced>(?:(?!```).)*?)\n?```"
    r"|[\w.]+ ?= ?(?P<q>\"\"\"|\'\'\')\n?(?P<quoted>(?:(?!\"\"\"|\'\'\').)*?)\n?(?P=q))\s*\Z",
    re.DOTALL,
)


def unfenced(text: str) -> str:
    """``text`` without the blank lines around it, and the text alone where it came wrapped in a Markdown code
    fence or a Python string assignment (``content = \"\"\"…\"\"\"``), or both, after at most a short lead-in
    ("Sure, here is the text:"): asked for write_file's ``content`` after a knowledge search, the 1.5B model wrote
    ``write_file = \"\"\"…\"\"\"`` around the right text (requests written for this, 2026-12-06)."""
    for _ in range(2):
        wrapped = _WRAPPED.match(text.strip())
        if wrapped is None:
            break
        text = wrapped.group("fenced") if wrapped.group("fenced") is not None else wrapped.group("quoted")
    return text.strip("\n").rstrip()


def without_argument(schema: dict[str, Any], key: str) -> dict[str, Any]:
    """``schema`` without its argument ``key`` (written apart, :func:`text_argument`)."""
    properties = {k: v for k, v in (schema.get("properties") or {}).items() if k != key}
    required = [k for k in schema.get("required") or () if k != key]
    return {**schema, "properties": properties, "required": required}


def takes_a_file(tool: MetonaToolDef) -> bool:
    """The tool works on a file given by a required :data:`PATH_ARGUMENT` string (read_file, write_file)."""
    path = _path_argument(tool)
    return path is not None and path[1]


def _has_argument(tool: MetonaToolDef, name: re.Pattern[str]) -> bool:
    """The tool has an argument whose name ``name`` matches (searched)."""
    schema = tool.parameters.model_dump(mode="json", exclude_none=True)
    return any(name.search(str(key)) for key in schema.get("properties") or {})


_FILE_PARAMETER = re.compile(r"(?:path|file|filename|filepath)s?$", re.IGNORECASE)


def works_on_files(tool: MetonaToolDef) -> bool:
    """The tool has an argument for a file or a folder (``path``, ``file_path``, ``filename``, ``files``,
    ``repo_path``): when the request names a file, the first decision is among the tools
    (:func:`named_file_tools`)."""
    return _has_argument(tool, _FILE_PARAMETER)


def named_file_tools(tools: Sequence[MetonaToolDef], messages: Sequence[MetonaMessage]) -> list[MetonaToolDef]:
    """When the request names a file (:func:`request_paths`), the tools its first decision is among
    (:func:`for_files`), without ``answer``: what a file holds, the model cannot know. Empty when it names none, or
    no such tool is offered. Answering was the 0.5B model's first choice for questions about what a named file
    says (answered from nothing), and so was the notes search. When every path it names is a file (it has an
    extension, or the request calls it a file, :func:`_called_a_file`) and it names no folder, not the tools that
    work in a folder (:func:`on_a_folder`): "According to docs/2024/plan.md, when is the beta?" drew list_directory
    on the file, which failed, and so did "X 这个文件" for a file X without an extension (agent-mine-v4, a tuning
    set)."""
    paths = request_paths(messages)
    if not paths:
        return []
    asked = question(messages)
    files_only = all(_a_file(p, asked) for p in paths) and named_folder(asked) is None
    return [t for t in for_files(tools, messages) if not (files_only and on_a_folder(t))]


def _a_file(path: str, text: str) -> bool:
    """``path`` is a file, not a folder: it has an extension, is a conventional file name without one
    (:data:`FILE_NAMES`: "项目里那个 Dockerfile 用的基础镜像是哪个 Python 版本？" drew search_files, which found the
    name and never read the file — agent-mine-v5, a tuning set, 2026-12-05), or the request calls it a file."""
    return bool(_EXTENSION.search(path)) or re.split(r"[/\\]", path)[-1] in FILE_NAMES or _called_a_file(path, text)


def _called_a_file(path: str, text: str) -> bool:
    """The request calls ``path`` a file: "X 这个文件", "文件 X", "the file X", "a file called X"."""
    if any(_zh_folder_name(m.group(1)) == path for m in _ZH_THIS_FILE.finditer(text)):
        return True
    quoted = r"[\s\"'“‘「]*" + re.escape(path)
    return bool(re.search(r"(?:\bfile(?:\s+(?:called|named|titled))?|文件)" + quoted, text, re.IGNORECASE))


def for_files(tools: Sequence[MetonaToolDef], messages: Sequence[MetonaMessage]) -> list[MetonaToolDef]:
    """The tools a step on a named file may use: those that :func:`works_on_files`, without a tool that changes a
    named file (:func:`names_its_file` and :func:`changes_things`) unless the request :func:`asks_for_a_change`."""
    change = asks_for_a_change(messages)
    return [t for t in tools if works_on_files(t) and (change or not (names_its_file(t) and changes_things(t)))]


def spoken_of_files(tools: Sequence[MetonaToolDef], messages: Sequence[MetonaMessage]) -> list[MetonaToolDef]:
    """When the request speaks of files or folders ("which of my files mention …", "哪些文件里写了 …", "the docs
    folder") without naming one, the tools a first decision the model is unsure of is made again among
    (:func:`for_files`, with ``answer``): the model's pick was a tool with no file or folder argument. Empty when
    the request speaks of neither, or no such tool is offered. The 0.5B model sent "Which of my markdown files
    mention Kubernetes?" and "帮我查查哪些文件提到了预算超支" to the notes search (p 0.74, 0.76), whose summary
    says nothing of files, with a tool that finds which files mention a text offered (requests written for this,
    2026-12-04). The tool so chosen counts as near the request (its relevance bar, :func:`relevant`): the request
    spoke of what it works on. Chosen again among the file tools, a Chinese "which files mention …?" got
    search_files at p 0.09, cosine 0.13, and was answered from nothing (agent-mine-v4, a tuning set, 2026-12-05)."""
    text = question(messages)
    if not (_FILE_WORDS.search(text) or speaks_of_folders(text)):
        return []
    return for_files(tools, messages)


def finding(tools: Sequence[MetonaToolDef], text: str) -> list[MetonaToolDef]:
    """Of the tools a request about files is decided again among (:func:`spoken_of_files`), those for a request
    that looks for a text in files it does not name (:func:`looks_for_text`): not the tools that only list a folder
    or take one file. "哪些文件里写了“报销”？", decided again among all of them, went to list_directory on a folder
    "报销", "归档 文件夹里有哪些文件提到了预算？" to read_file with no file to read (requests written for this,
    2026-12-05). A request that asks which files (:func:`asks_which_files`) and looks for no text: not the tools that
    take one file (the file is what it asks for; "Which file did I put the gate code for the lake cabin in?" read a
    file named by the model, agent-mine-v5, a tuning set). All of them when the request does neither, or none would
    be left."""
    if looks_for_text(text):
        kept = [t for t in tools if not (_lists(t) or takes_a_file(t))]
    elif asks_which_files(text):
        kept = [t for t in tools if not takes_a_file(t)]
    else:
        kept = []
    return kept or list(tools)


def about_files_itself(tool: MetonaToolDef) -> bool:
    """The tool's first sentence speaks of files or folders though it takes no file or folder: a pick of it for a
    request about files or folders is no pick of a tool for something else (list_allowed_directories for
    "你现在能访问哪些目录？" was decided again among the tools with a path, and answered — the tuning half's MCP
    cases, 2026-12-05)."""
    summary = first_sentence(tool.description or "")
    return bool(_FOLDER_WORDS.search(summary) or _FILE_WORD.search(summary))


def needs_the_answer(tool: MetonaToolDef, text: str) -> bool:
    """``tool`` takes one file (:func:`takes_a_file`) and ``text`` asks which file (:func:`asks_which_files`): the
    file it needs is what the request asks for — the pick is made again (:func:`finding`)."""
    return takes_a_file(tool) and asks_which_files(text)


_WHICH_FILES = re.compile(
    r"\bwhich\b[^.?!,;]{0,24}\bfiles?\b|哪些[^，。？！,?!]{0,6}文件|哪个[^，。？！,?!]{0,6}文件"
    r"|\bfiles?\b[^.?!;]{0,40}\bwhich (?:one|of them)\b",  # "one of my files mentions …, which one is it?"
    re.IGNORECASE,
)


def asks_which_files(text: str) -> bool:
    """``text`` asks which files ("which of my files mention …", "哪些文件里写了 …", "one of my files says …, which
    one?"): the answer is files, so a pick with no file or folder argument is made again among those that have one
    (:func:`spoken_of_files`) however sure the model was. The 0.5B model sent "哪些文件里写了“报销”？" to the notes
    search at p 0.84 (a request written for this, 2026-12-05), and a request saying that one of the user's files
    mentions a word, then asking which one, at p 0.84 too (agent-mine-v6, a tuning set, 2026-12-06)."""
    return bool(_WHICH_FILES.search(text))


def speaks_of_folders(text: str) -> bool:
    """``text`` speaks of a folder ("search the docs folder for …", "在 归档 文件夹里找找 …"): a pick with no file or
    folder argument is made again among those that have one (:func:`spoken_of_files`) however sure the model was —
    no other tool looks in a folder. The 0.5B model sent a search of a named folder for a quoted word to the notes
    search at p 0.83 (agent-mine-v4, a tuning set, 2026-12-05)."""
    return bool(_FOLDER_WORDS.search(text))


_URL = re.compile(r"\bhttps?://[^\s<>\"'“”‘’「」（）]+", re.IGNORECASE)
_URL_PARAMETER = re.compile(r"(?:url|uri|link|href)s?$", re.IGNORECASE)


def takes_a_url(tool: MetonaToolDef) -> bool:
    """The tool has an argument for a web address (``url``, ``page_url``, ``uri``, ``link``, ``href``)."""
    return _has_argument(tool, _URL_PARAMETER)


def named_url_tools(tools: Sequence[MetonaToolDef], messages: Sequence[MetonaMessage]) -> list[MetonaToolDef]:
    """When the request gives a web address (``http://``, ``https://``), the tools its first decision is among: those
    that :func:`takes_a_url`, without ``answer`` (what a page says, the model cannot know). Empty when it gives none,
    or no such tool is offered. The 0.5B model sent "read the page at https://… and summarize it" to a tool for
    local files (which then had no file to read: answered from nothing), with a fetch tool offered."""
    return [t for t in tools if takes_a_url(t)] if _URL.search(question(messages)) else []


def _bare(path: str) -> str:
    return path.strip().replace("\\", "/").removeprefix("./")


def ground_arguments(schema: dict[str, Any], paths: Sequence[str]) -> dict[str, Any]:
    """The arguments schema (:func:`arguments_schema`) with the :data:`PATH_ARGUMENT` constrained to the paths the
    request names: the call works on a file the user named, spelled as the user spelled it."""
    properties = dict(schema.get("properties") or {})
    if PATH_ARGUMENT not in properties or not paths:
        return schema
    properties[PATH_ARGUMENT] = {"type": "string", "enum": list(paths)}
    return {**schema, "properties": properties}


_FOLDER_WORD = r"(?:\b(?:folders?|director(?:y|ies)|dir)\b|文件夹|目录)"
_FOLDER_WORDS = re.compile(_FOLDER_WORD, re.IGNORECASE)
_FILE_WORD = re.compile(r"\bfiles?\b|文件(?!夹)", re.IGNORECASE)


def on_a_folder(tool: MetonaToolDef) -> bool:
    """A tool that works in a folder given by its :data:`PATH_ARGUMENT` string, and changes no file: its
    description's first sentence, or the argument's own description, speaks of a folder or directory and not of
    a file (list_directory: "List a workspace folder"; search_files' path: "Folder to search."; not a
    get_file_info "about a file or directory")."""
    if _path_argument(tool) is None or names_its_file(tool):
        return False
    return any(_FOLDER_WORDS.search(t) and not _FILE_WORD.search(t) for t in _path_texts(tool))


def folder_first(
    choice: str | None, tools: Sequence[MetonaToolDef], messages: Sequence[MetonaMessage]
) -> MetonaToolDef | None:
    """The tool to call first instead of the ``choice`` of a first decision, a read of a file (:func:`takes_a_file`,
    changing nothing), when the request names no file but a folder (:func:`named_folder`): the offered tool that
    works in a folder and needs nothing else (:func:`on_a_folder`, no other required argument: list_directory) —
    what is in the folder first, then the file read is one of those it holds (:func:`known_paths`). None to keep
    the choice. A Chinese request to open the newest file of a named folder went to read_file with no file to read,
    and was answered with steps for the user to take (agent-mine-v4, a tuning set, 2026-12-05). The swap is not
    weighed by the relevance bar (:func:`relevant`): the request named the folder it works in.

    So too a pick of a tool that works in a folder and needs more than the folder (a search's text), when the
    request asks what the folder holds and quotes nothing to look for (:func:`asks_what_it_holds`): "照片整理
    这个文件夹里都有啥" went to search_files, which searched the folder for its own name (agent-mine-v4, a tuning
    set). And when it asks for the newest of what the folder holds, quoting nothing to look for
    (:func:`asks_the_newest`): a search matches what files say, not which is latest; a listing shows their names
    (dates, versions). A request to open the latest minutes of a named folder went to search_files, then read the
    file the search matched first (agent-mine-v6, a tuning set, 2026-12-05)."""
    tool = next((t for t in tools if t.name == choice), None)
    if tool is None or changes_things(tool) or request_paths(messages):
        return None
    asked = question(messages)
    if named_folder(asked) is None:
        return None
    reads = reads_a_file(tool)
    searches = on_a_folder(tool) and not _lists(tool) and (asks_what_it_holds(asked) or asks_the_newest(asked))
    if not (reads or searches):
        return None
    listers = [t for t in tools if _lists(t)]
    return listers[0] if listers else None


_NEWEST = re.compile(r"\b(?:latest|newest|most recent)\b|最新|最近(?:的|一)", re.IGNORECASE)


def asks_the_newest(text: str) -> bool:
    """``text`` asks for the newest of something (latest, most recent, 最新, 最近的) and quotes no text to look for
    (:func:`quotes_a_text`)."""
    return bool(_NEWEST.search(text)) and not quotes_a_text(text)


def reads_a_file(tool: MetonaToolDef) -> bool:
    """The tool reads one file: it takes one (:func:`takes_a_file`), works in no folder (:func:`on_a_folder`: a
    plugin's listing or search with a required folder path is not a read) and changes nothing."""
    return takes_a_file(tool) and not on_a_folder(tool) and not changes_things(tool)


def reads_a_guess(tool: MetonaToolDef, messages: Sequence[MetonaMessage]) -> bool:
    """A first pick that reads a file (:func:`reads_a_file`) for a request that names no file or folder, speaks of
    none (file, document, folder; 文件, 文档, 文件夹) and quotes a text (:func:`quotes_a_text`): the quote is what it
    asks about, and the file would be a name made up for it. A question after the source of a quoted line of a
    classical poem read ``poems/<the line>.txt`` at p 0.73 (agent-mine-v6, a tuning set, 2026-12-05); the answer is
    written instead."""
    if not reads_a_file(tool) or request_paths(messages):
        return False
    asked = question(messages)
    if named_folder(asked) or _FILE_WORDS.search(asked) or speaks_of_folders(asked):
        return False
    return quotes_a_text(asked)


def _lists(tool: MetonaToolDef) -> bool:
    """The tool works in a folder (:func:`on_a_folder`) and needs nothing but the folder: it lists what it holds."""
    return on_a_folder(tool) and set(tool.parameters.model_dump(exclude_none=True).get("required") or ()) <= {
        PATH_ARGUMENT
    }


_WHAT_IT_HOLDS = re.compile(
    r"\bwhat(?:'s| is| are| do| does)?\b[^.?!,;]{0,24}\b(?:in|inside|under)\b|\bcontents?\b|"
    r"有什么|有啥|有哪些|是什么东西|放了(?:些)?(?:什么|啥)|都放了|内容列出|列(?:一下|出)",
    re.IGNORECASE,
)


_A_TEXT_IN_FILES = re.compile(r"\b(?:mention|contain|say|says|said|about)|提到|提及|写了|写着|写到|包含|含有|关于")


def asks_what_it_holds(text: str) -> bool:
    """``text`` asks what a folder holds ("what's in …", "… 里都有啥", "列一下 …"), and no text to look for in its
    files (none quoted, nothing they mention or are about)."""
    return bool(_WHAT_IT_HOLDS.search(text)) and not looks_for_text(text)


_A_QUOTE = re.compile(r"`[^`\n]+`|\"[^\"\n]+\"|“[^”\n]+”|「[^」\n]+」|‘[^’\n]+’")
"""A quoted text, as :data:`_QUOTED` reads one but without straight single quotes (in "what's in … I don't" the
apostrophes would pair) and with 「」."""
_TITLE = re.compile(r"《[^》\n]+》")
"""A title (a book's, a film's), which speaks of nobody's own."""
_FOLDER_AFTER = re.compile(r"\s*" + _FOLDER_WORD, re.IGNORECASE)
_FOLDER_BEFORE = re.compile(_FOLDER_WORD + r"\s*$", re.IGNORECASE)


def looks_for_text(text: str) -> bool:
    """``text`` gives a text to look for in files: one quoted that is not a folder's name (:func:`quotes_a_text`), or
    what they mention, say or are about (:data:`_A_TEXT_IN_FILES`)."""
    return quotes_a_text(text) or bool(_A_TEXT_IN_FILES.search(text))


def quotes_a_text(text: str) -> bool:
    """``text`` quotes a text that is not a folder's name (「学习资料」文件夹, the "Tax Return 2024" folder)."""
    for quote in _A_QUOTE.finditer(text):
        before = max(0, quote.start() - 24)  # a folder word just before it: read near the quote, not the whole text
        named = _FOLDER_AFTER.match(text, quote.end()) or _FOLDER_BEFORE.search(text, before, quote.start())
        if not named:
            return True
    return False


def ground_folder(schema: dict[str, Any], folder: str) -> dict[str, Any]:
    """The arguments schema with the :data:`PATH_ARGUMENT` the one folder the request names (:func:`named_folder`),
    given: the 0.5B model wrote ``"path": "note"`` for "在 笔记 文件夹里搜一下" and the search found no such folder."""
    grounded = ground_arguments(schema, [folder])
    if grounded is schema:
        return schema
    required = [*(r for r in schema.get("required") or () if r != PATH_ARGUMENT), PATH_ARGUMENT]
    return {**grounded, "required": required}


def offered(tools: Sequence[MetonaToolDef]) -> list[MetonaToolDef]:
    """The tools the decision may name: each name once, never :data:`ANSWER`, never a name a JSON string would
    escape (the decision's expression spells names literally)."""
    seen: set[str] = set()
    out = []
    for tool in tools:
        name = tool.name
        if name == ANSWER or name in seen or json.dumps(name)[1:-1] != name:
            continue
        seen.add(name)
        out.append(tool)
    return out


def first_sentence(text: str) -> str:
    """A description's first sentence (up to ``.``, ``:`` or ``;`` followed by a space or the end, or a Chinese
    full stop, colon or semicolon), without the stop."""
    text = " ".join(text.split())
    match = re.match(r"(.+?)(?:[.:;](?:\s|$)|[。；：])", text)
    return (match.group(1) if match else text).strip()


def signature(tool: MetonaToolDef) -> str:
    """``name(arg: type, optional?: type, choice?: a|b)`` from the tool's parameter schema."""
    schema = tool.parameters.model_dump(mode="json", exclude_none=True)
    required = set(schema.get("required") or ())
    args = []
    for key, spec in (schema.get("properties") or {}).items():
        kind = "|".join(str(v) for v in spec["enum"]) if spec.get("enum") else str(spec.get("type") or "any")
        args.append(f"{key}{'' if key in required else '?'}: {kind}")
    return f"{tool.name}({', '.join(args)})"


ANSWER_EXAMPLES = ("Explain what a hash table is.", "给“迅速”找一个近义词。")
"""Requests answered directly, shown to a turn's first decision around the offered tools' own examples
(:func:`tool_prompt`). Generic, in both languages, none of them a benchmark's request."""
TOOL_EXAMPLES = 4
"""Most tools whose example request (:attr:`MetonaToolDef.examples`, the first) a decision shows: the most similar
to the request (the tools come ranked), shown in the order the tools were offered."""


def examples(tools: Sequence[MetonaToolDef], order: Sequence[str] = ()) -> list[tuple[str, str]]:
    """A first decision's examples: the first :data:`ANSWER_EXAMPLES`, the first example of each of the first
    :data:`TOOL_EXAMPLES` tools that ship one (in the order of the names in ``order``, those not in it last), the
    second answer example.

    The built-in tools' examples were the decision's own before (issue 32): ``calculator`` and
    ``knowledge_search`` ship them now, as a plugin may (its manifest's ``tools.examples``); offered in the
    registry's order, the built-in tools are shown the same examples in the same order as before. Measured with
    scripts/bench/bench_tool_decision.py when they were the decision's: first decisions 23/31 → 25/31 on
    agent-core-v1's prompts and 21/28 → 23/28 on the held-out set; without the two tool examples (2026-12-03)
    every notes question of agent-core-v1 but one was answered from memory or sent to another tool (30/40 +
    31/36 against 32/40 + 32/36). Not after a result: there they drew "45 times 12", already calculated, to
    knowledge_search (held-out next steps 6/8 → 4/8). A ``search_files`` example ("Find every file that mentions
    …") was tried (2026-12-04) and dropped: on agent-bilingual-v1 no search case went to it, and a translation
    request went to the calculator."""
    chosen = [t for t in tools if t.examples][:TOOL_EXAMPLES]
    place = {name: i for i, name in enumerate(order)}
    chosen.sort(key=lambda t: place.get(t.name, len(place)))
    first, *rest = ANSWER_EXAMPLES
    return [(first, ANSWER), *((t.examples[0], t.name) for t in chosen if t.examples), *((q, ANSWER) for q in rest)]


def tool_prompt(tools: Sequence[MetonaToolDef], *, examples_shown: bool = True, order: Sequence[str] = ()) -> str:
    """The system message of the decision: the tools one line each, the rule, the format, then
    (``examples_shown``) the :func:`examples` (``order``: the names as the tools were offered)."""
    lines = "\n".join(f"- {signature(t)}: {first_sentence(t.description)}" for t in tools)
    text = f"# Tools\n{lines}\n\n{GUIDANCE}\n{FORMAT}"
    shots = [f'{" ".join(q.split())} -> {{"tool": "{n}"}}' for q, n in examples(tools, order)] if examples_shown else []
    return text + ("\n\nExamples:\n" + "\n".join(shots) if shots else "")


def arguments_prompt(tool: MetonaToolDef, request: str = "", *, plan: bool = False) -> str:
    """The system message of the arguments step: the chosen tool in full (its description, each argument with its
    type, whether it is required and its description, defaults included), the rule for optional arguments, the
    format, and the numbers the ``request`` writes with a word of scale in digits (:func:`scaled_numbers`). The
    decision's one-line signature left the model guessing: it wrote ``"path": "workspace"`` where the default (``.``)
    was meant, and chose ``"mode": "fts"`` over the better default."""
    schema = tool.parameters.model_dump(mode="json", exclude_none=True)
    required = set(schema.get("required") or ())
    lines = []
    for key, spec in (schema.get("properties") or {}).items():
        kind = shape(spec)
        if spec.get("enum"):
            kind += ", one of " + "|".join(str(v) for v in spec["enum"])
        need = "required" if key in required else "optional"
        text = " ".join(str(spec.get("description") or "").split())
        lines.append(f"- {key} ({kind}, {need})" + (f": {text}" if text else ""))
    description = " ".join(tool.description.split())
    args = "\n".join(lines)
    scaled = "; ".join(f"{written} = {value}" for written, value in scaled_numbers(request))
    digits = f"\nIn digits: {scaled}." if scaled else ""
    rules = f"{OPTIONAL_RULE}\n{VALUE_RULE}{digits}" + (f"\n{PLAN_RULE}" if plan else "")
    return f"# Tool\n{tool.name}: {description}\n\nArguments:\n{args}\n\n{rules}\n{FORMAT}"


def shape(spec: dict[str, Any], depth: int = 0) -> str:
    """An argument's type in a few words, nested ones spelled out: ``array of object {name: string, tags?:
    array of string}``."""
    kind = str(spec.get("type") or "any")
    items = spec.get("items")
    if kind == "array" and isinstance(items, dict):
        return f"array of {shape(items, depth)}"
    keys = spec.get("properties")
    if kind == "object" and isinstance(keys, dict) and keys and depth < 3:
        required = set(spec.get("required") or ())
        inner = ", ".join(
            f"{k}{'' if k in required else '?'}: {shape(v, depth + 1) if isinstance(v, dict) else 'any'}"
            for k, v in keys.items()
        )
        return f"object {{{inner}}}"
    return kind


def tool_summary(tool: MetonaToolDef) -> str:
    """What a tool is compared with the request by: its name in words and its description's first sentence."""
    return f"{tool.name.replace('_', ' ')}: {first_sentence(tool.description)}"


_NAMING_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
_COMMON = frozenset(
    "the and for with from into onto that this these those its not are was were been being has have had "
    "can could will would should may might must shall any all each every some one two out about over under "
    "what which who whom whose when where why how than then also only just more most very such use used using "
    "get gets set sets give gives given make makes made let you your yours our ours their them they his her "
    "user users tool tools".split()
)
"""Words that say nothing of what one tool does (a request's and a summary's alike): not counted by
:func:`named_by`."""
ZH_WORDS = {
    "笔记": "note",
    "文件夹": "folder",
    "目录": "directory",
    "文件": "file",
    "文档": "document",
    "时间": "time",
    "日期": "date",
    "天气": "weather",
    "邮件": "email",
    "日历": "calendar",
    "网页": "page",
    "网址": "url",
    "链接": "link",
}
"""Chinese words a request names things by, in the English word tool descriptions use (:func:`named_by`): a
request in Chinese names what an English description names."""


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _naming_words(text: str) -> set[str]:
    """The English words of ``text`` that can name a thing (:data:`_COMMON` and words under three letters dropped,
    plurals made singular)."""
    return {_singular(w) for w in _NAMING_WORD.findall(text.lower()) if w not in _COMMON}


def _named_words(text: str) -> set[str]:
    """:func:`_naming_words`, with the English of the :data:`ZH_WORDS` ``text`` holds."""
    words = _naming_words(text)
    words.update(english for chinese, english in ZH_WORDS.items() if chinese in text)
    return words


def named_by(tools: Sequence[MetonaToolDef], request: str) -> dict[str, set[str]]:
    """For each offered tool, the words of its own summary (:func:`tool_summary`) that the request names and no
    other offered tool's summary does: "Look in my notes for the gym schedule" names the notes search's "note";
    "根据我的笔记，装修预算一共多少？" too (:data:`ZH_WORDS`). A tool the model named that the request names this way
    is called however far the embedder puts it (:func:`relevant`) and is not swapped for a nearer one that the
    request does not name so (:func:`nearer`): the 0.5B model named the notes search at p 0.46 for the first
    (cosine under :data:`RELEVANT_COSINE`: answered), at p 0.79 for the second and "What did I write in my notes
    about the landlord's phone number?", which the embedder put nearer the calculator (requests written for this,
    2026-12-04)."""
    own = {t.name: _named_words(tool_summary(t)) for t in tools}
    counts = Counter(word for words in own.values() for word in words)
    asked = _named_words(request)
    return {name: {w for w in words & asked if counts[w] == 1} for name, words in own.items()}


RELEVANT_COSINE = 0.15
RELEVANT_P = 0.5
"""A first decision's tool is called when the request is near what the tool says it does (the cosine of the
request with the tool's own summary, :func:`tool_summary`, at least :data:`RELEVANT_COSINE`) or the model is sure
of it (the probability it gave the name, at least :data:`RELEVANT_P`); else the answer is written
(:func:`relevant`). Only what every tool has is used (its name and description), so a plugin's tool is judged as a
built-in one. Chosen on the tuning half of scripts/bench/bench_tool_generalisation.py (BFCL v4 and
tool-generalisation-v1, 2026-12-03, the arguments step skipped): of 25 tools the model named where none fitted,
7 fall below both bars ("How many calories does an apple have?" → calculate_litigation_cost: cosine 0.09,
p 0.36); of its 126 right choices, 1 does. A tool under both bars that gives way to a clearly nearer one
(:func:`nearer`) at least :data:`RELEVANT_COSINE` from the request is the nearer one's call (before, the
answer): on the tuning half's real users' and no-call kinds (2026-12-04, night, 300 a kind, decisions only) 12
picks went so, 9 to the right tool ("I'm looking for Pop songs from the album 'Warrior'" → Media_3_FindMovies at
p 0.20, cosine 0.14; Music_3_LookupMusic at 0.35), 3 where none fitted."""


RELEVANT_FLOOR = 0.01
"""Below this probability of the name it wrote, a first decision's tool is not called however near it is: the
model wanted a name that is not offered (the constrained decoding then spells an offered one token by token). On
the tuning half (2026-12-04, decisions only) one call fell below it, ``git_log`` at p ≈ 1e-8 for "What's the
difference between git merge and git rebase?" (cosine 0.51), and none of the 140 right calls (the lowest 0.02, after
the second look, which this bar does not judge)."""


def relevant(cosine: float | None, score: float | None, nearer_cosine: float | None = None) -> bool:
    """The tool a first decision named, or the clearly nearer one it gives way to (:func:`nearer`, its cosine
    ``nearer_cosine``), is worth calling (:data:`RELEVANT_COSINE`, :data:`RELEVANT_P`, :data:`RELEVANT_FLOOR`)."""
    if _known(score) and score < math.log(RELEVANT_FLOOR):
        return False
    near = any(c is not None and c >= RELEVANT_COSINE for c in (cosine, nearer_cosine))
    return near or (_known(score) and score >= math.log(RELEVANT_P))


NEARER_P = 0.8
NEARER_GAP = 0.1
"""A first decision's tool the model gave less than :data:`NEARER_P` is swapped for an offered tool whose summary is
at least :data:`NEARER_GAP` nearer the request (cosine; :func:`nearer`). On the tuning half (2026-12-04, 60 a kind,
decisions only), of the 171 requests that needed a tool, the right one was never more than 0.11 below the nearest
tool when the model chose it, and of the 12 where it chose a wrong one, 6 were the nearest by 0.10–0.31 at p 0.10–0.77
("a place to buy in San Leandro with 3 bedrooms" → RideSharing_2_GetRide at p 0.10, cosine 0.17;
Homes_2_FindHomeByArea 0.48); one right choice, at p 0.37, is 0.11 below the nearest and is lost. 0.5 was tried
first; "Which of my files mention Project Falcon?" went to knowledge_search at p 0.63 (search_files 0.15 nearer).

Not for a request in Chinese: the tools' summaries are English, and across the two languages the cosine is weak
(0.1–0.35 for the right tool) and led by shared words, so it overruled the model for the wrong tool — a Chinese
request to list a folder's files went from list_directory (cosine 0.17) to search_files (0.29), a translation request
from the calculator (which the relevance bar then turns down) to search_files (agent-mine-v4, a tuning set,
2026-12-05). None of the tuning half's swaps was of a Chinese request."""


def sure(score: float | None) -> bool:
    """The model gave the name it wrote at least :data:`NEARER_P`: its first decision is not second-guessed."""
    return _known(score) and score >= math.log(NEARER_P)


def nearer(choice: str, cosines: dict[str, float], score: float | None) -> str | None:
    """The offered tool to call instead of ``choice`` (:data:`NEARER_P`, :data:`NEARER_GAP`), None to keep it."""
    if sure(score):
        return None
    best = max(cosines, key=lambda name: cosines[name])
    return best if cosines[best] - cosines[choice] >= NEARER_GAP else None


_A_QUANTITY = re.compile(
    r"\bhow (?:much|many|long|far|often)\b|\b(?:total|sum|average|per cent|percent(?:age)?)\b|"
    r"多少|几[个天年月次倍成]|一共|总共|合计|平均|百分之",
    re.IGNORECASE,
)
"""A request that asks for a quantity (how much, a total, an average; 多少, 一共): what computing answers."""


def asks_a_quantity(text: str) -> bool:
    """``text`` asks for a quantity (:data:`_A_QUANTITY`). What remains of a request after a result
    (:func:`what_remains`) that asks one, and was answered without computing, is decided on its own: "读一下
    旅行/日本行花费.txt，我们四个人平摊的话每人要出多少？" was answered with the file's first number after the read
    (agent-mine-v5, a tuning set, 2026-12-05)."""
    return bool(_A_QUANTITY.search(text))


_A_FACT = re.compile(
    r"\b(?:who|whom|whose|when|where|which)\b|\bwhat\b|\bhow (?:many|much|long|far|old|big|tall|high|deep|heavy|"
    r"fast|often)\b|\bhow do (?:i|you|we) say\b|谁|哪|几|多少|什么时候|是什么|叫什么|怎么说|等于",
    re.IGNORECASE,
)
_COMPOSING = re.compile(
    r"\b(?:write|compose|draft|explain|describe|list|tips?|ideas?|suggest\w*|recommend\w*|advice|steps?|"
    r"summar\w+|why|compare)\b|写|建议|介绍|解释|列出|推荐|总结|为什么|怎么(?!说)|如何|比较",
    re.IGNORECASE,
)
FACT_CHARS = 160
"""Longest request (characters) :func:`asks_a_fact` reads as one fact asked."""


def asks_a_fact(text: str) -> bool:
    """``text`` asks one fact (who, what, when, how many; 谁, 哪, 多少, 怎么说 — outside what it quotes) in a
    question of at most :data:`FACT_CHARS`, and asks nothing to be written, explained, listed or advised
    (:data:`_COMPOSING`): an answer of a few words, which the larger model knows better. On tuning sets' questions
    (2026-12-05) of Australia's capital, the seconds in an hour, the first of the 24 solar terms and half past four
    p.m. in 24-hour time, the 0.5B model answered Sydney, 60, 春 and 12:00, the 1.5B model Canberra, 3600, 春分
    (立春 is right) and 16:30."""
    text = text.strip()
    if not text or len(text) > FACT_CHARS or not re.search(r"[?？]|[吗呢]$", text):
        return False
    bare = _TITLE.sub(" ", _A_QUOTE.sub(" ", text))
    return _A_FACT.search(bare) is not None and _COMPOSING.search(bare) is None


def _own_numbers(text: str) -> list[int | float]:
    """The numbers ``text`` states (:func:`stated_numbers`) that are not a date's (:func:`_dated`)."""
    dated = set(_dated(text))
    return [n for n in stated_numbers(text) if n not in dated]


def unused_numbers(text: str, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[int | float]:
    """The numbers ``text`` (what remains of a request, :func:`what_remains`) states (:func:`stated_numbers`, not a
    date's) that no argument of the turn's ``calls`` holds: what a further calculation is to use. A request to read
    a week's hours, total them and say what that pays at an hourly rate had the sum computed, none of the rate, and
    the answer multiplied it wrongly (agent-mine-v5, a tuning set, 2026-12-05)."""
    used = {float(n) for _, args in calls for n in _numbers_in(args)}
    return [n for n in _own_numbers(text) if float(n) not in used]


def from_the_number(text: str, numbers: Sequence[int | float]) -> str:
    """``text`` from the connective before the first of ``numbers`` it writes in digits (:func:`unused_numbers`):
    the clause a further calculation serves ("total the hours, and say what that pays at $38 an hour" → "say what
    that pays at $38 an hour"; shown the whole, the arguments model summed the hours again). The whole ``text`` when
    it writes none of them so."""
    wanted = {float(n) for n in numbers}
    for match in _DATA_NUMBER.finditer(text):
        if float(match.group().replace(",", "")) in wanted:
            starts = [m.end() for m in _CONNECTIVE.finditer(text, 0, match.start())]
            return text[starts[-1] if starts else 0 :].strip(" ,，;；:：") or text
    return text


def arithmetic(request: str) -> bool:
    """The request states two amounts or more (numbers of its own, :func:`stated_numbers`, not a date's,
    :func:`_dated`) and asks for a quantity (:data:`_A_QUANTITY`): what a tool that computes is near, whatever the
    cosine — a pick of one is near enough (its relevance bar, :func:`relevant`), a pick of another gives way to one
    (:func:`computes_instead`). "昨晚三个人聚餐一共花了 487 元，AA 的话每人该出多少？保留两位小数。" picked the
    calculator at p 0.46 and, its cosine with the English summary low, was answered from memory
    (agent-bilingual-v1, a tuning set, 2026-12-05)."""
    return len(_own_numbers(request)) >= 2 and asks_a_quantity(request)


def computes_instead(
    choice: str, tools: Sequence[MetonaToolDef], cosines: dict[str, float], score: float | None, request: str
) -> str | None:
    """The offered tool that computes (:func:`computes`) to call instead of ``choice``, a first pick the model is
    unsure of (:func:`sure`) that computes nothing, when the request states two amounts or more (numbers of its
    own, :func:`stated_numbers`, not a date's, :func:`_dated`), asks for a quantity (:data:`_A_QUANTITY`) and that
    tool is nearer the request than the pick (cosine); None to keep it. A request that gives its numbers and asks
    what they come to is arithmetic, even when it speaks of the user's own money: "My salary is $5,800 a month and
    I save 22% of it. How much do I save in a year?" went to the notes search at p 0.51 (the calculator 0.10
    nearer, under :data:`NEARER_GAP`), "我存了5万块，年化2.75%，存3年复利一共能拿多少？" to the notes search at p 0.46
    and, far from it, was answered from memory (requests written for this, 2026-12-05). The swap holds for a
    Chinese request too: a computing tool is not one of the file tools whose English summaries the cross-language
    cosine confused (:data:`NEARER_P`); where the cosine leaves it under :data:`RELEVANT_COSINE`, the request's
    amounts make it near enough. Not "What did I write about the 2 job offers, 450 and 520 a day?" (no quantity
    asked: its notes are)."""
    if sure(score) or choice not in cosines:
        return None
    if any(t.name == choice and computes(t) for t in tools):
        return None
    if not arithmetic(request):
        return None
    fits = [t.name for t in tools if computes(t) and cosines.get(t.name, -1.0) > cosines[choice]]
    return max(fits, key=lambda name: cosines[name]) if fits else None


NAMED_WORDS = 2
"""Words of one offered tool's own summary (and no other's) a request must name for an unsure first pick it names
nothing of to give way to that tool (:func:`named_instead`)."""


def named_instead(
    choice: str, named: dict[str, set[str]], score: float | None, own: Collection[str] = (), said: Collection[str] = ()
) -> str | None:
    """The one offered tool the request names by :data:`NAMED_WORDS` or more of its own words (:func:`named_by`), to
    call instead of ``choice``, a pick the model is unsure of (:func:`sure`) that the request names nothing of; None
    to keep it. On the tuning half's decisions (2026-12-04, 300 a kind, decisions only) 11 picks moved so, all to the
    right tool ("get a list of attractions in Paris that are suitable for children?" →
    Flights_4_SearchRoundtripFlights at p 0.51; Travel_1_FindAttractions names "attraction", "children", "list"),
    none from it; by one word alone, 9 more moved right and 12 wrong (a request's "find", "play", "provide"). One
    word is enough for a tool in ``said``, whose whole name a command says (:func:`says_its_name`: "make session:9f3
    expire in 30 min" offered Redis's ``set`` and ``expire`` went to ``set`` at p 0.57: a blind set of other people's
    tools, 2026-12-07), and for a tool in ``own``, one that searches the user's own things for a request that speaks of
    the user (:func:`spoken_of_as_theirs`): a Chinese request to look in "我的笔记" for a trip's plan went to
    list_directory at p 0.44 and, far from it, was answered from memory (agent-bilingual-v1, a tuning set,
    2026-12-05)."""
    if sure(score) or named.get(choice):
        return None
    fits = [
        name
        for name, words in named.items()
        if len(words) >= NAMED_WORDS or (words and name in own) or (words and name in said)
    ]
    return fits[0] if len(fits) == 1 else None


def says_its_name(tool: MetonaToolDef, text: str) -> bool:
    """The request ``text`` is no question and, outside its paths, ids and quoted text, says the tool's whole name
    as words (:func:`named_instead`): "make session:9f3 expire in 30 min" says ``expire``; not "when does
    session:9f3 expire?" (a question: a read, ``ttl``, had moved to ``expire``), "open archive/notes.txt" (a path),
    "post 'memory is low'" (a review, 2026-12-07)."""
    if text.rstrip().endswith(("?", "？")):
        return False
    bare = _QUOTED.sub(" ", text)
    for path in named_paths(bare):
        bare = bare.replace(path, " ")
    bare = _AN_ID.sub(" ", bare)
    return {_singular(w) for w in _tool_words(tool.name)} <= _named_words(bare)


_SEARCHES_OWN = re.compile(
    r"\b(?:search|find|look)\w*\b(?:\s+(?:up|through|in|into))?\s+(?:(?:the|a) user's|your)\s+[a-z]"
    r"|\b(?:search|find|look)\w*\b[^.;:]*?\b(?:in|within|through|across)\s+(?:(?:the|a) user's|your)\s+[a-z]",
    re.IGNORECASE,
)
"""A description's first sentence that searches what is the user's own, named as what is searched: "Search the
user's notes for …", "Searches a user's calendar for …", "Search for events … within a user's calendar", "Find …
in your mailbox"; not "Search for movies that fit a user's preferences"."""
_FIRST_PERSON = re.compile(
    r"(?<![\w'’])(?:i|i['’](?:m|ve|d|ll)|me|my|mine|myself|we|we['’](?:re|ve|d|ll)|us|our|ours)(?![\w'’])|[我咱]",
    re.IGNORECASE,
)
"""The words by which a request speaks of the one asking: I, me, my, we, our (and their contractions), 我, 咱."""
_HOW_TO = re.compile(r"\bhow (?:do|can|could|should|would) (?:i|we)\b", re.IGNORECASE)
"""A how-to's "I" ("How do I say … in French?", "How can I …") is anyone's."""


_MODEL_NAME = re.compile(r"(?<![\w.])(?=[A-Za-z-]*\d)(?=[\d-]*[A-Za-z])[A-Za-z][A-Za-z\d-]*\d[A-Za-z\d]*(?![\w.])")
"""A name of letters and digits that begins with a letter: X1, Q3, RTX-4090, iPhone15 (not 4K, 24-hour or 2.5L)."""


def searches_the_users(tool: MetonaToolDef) -> bool:
    """The tool searches the user's own things, by its description's first sentence (:data:`_SEARCHES_OWN`): the
    notes search, a plugin's search of the user's calendar or mail."""
    return _SEARCHES_OWN.search(first_sentence(tool.description)) is not None


def speaks_of_the_user(text: str) -> bool:
    """``text`` speaks of the user, outside what it quotes (:data:`_A_QUOTE`), titles (《…》), a how-to's "how do
    I" (:data:`_HOW_TO`) and the asking's "help me", 帮我 (:data:`_HELP_ME`): I, my, we, our
    (:data:`_FIRST_PERSON`), 我, 咱 — "把“我周五晚上有空”译成法语" does not, nor "帮我把这句话改得委婉一点：“…”"."""
    bare = _HELP_ME.sub(" ", _HOW_TO.sub(" ", _TITLE.sub(" ", _A_QUOTE.sub(" ", text))))
    return _FIRST_PERSON.search(bare) is not None


_HELP_ME = re.compile(r"(?:帮|替)(?:我|咱)|告诉我|提醒我|\b(?:help|tell|remind)\s+me\b", re.IGNORECASE)
"""How a request asks ("help me write…", "帮我改一下…", "tell me", "remind me", 告诉我), not what it speaks of: a
request to rewrite a quoted line politely went to the notes search for its 帮我 (agent-mine-v7, a tuning set,
2026-12-06), "remind me, who wrote Pride and Prejudice?" for its "me" (written for this, 2026-12-06)."""


ZH_TOPICS = {
    "weather": re.compile(
        r"天气|气温|温度|度|雨|雪|雹|晴|阴|云|风|雷|冷|热|暖|凉|穿|伞|湿|气候|台风|雾|霾|空气|紫外线|预报|气象|日出|日落|PM"
    ),
    "news": re.compile(r"新闻|资讯|头条|消息|报道|时事|热点|热搜|快讯|大事|动态|最近|近况|怎么样"),
    "stock": re.compile(r"股|行情|涨|跌|证券|基金|大盘|市值|市盈率|收盘|开盘|走势|交易|价格|钱"),
    "flight": re.compile(r"航班|机票|飞机|飞|航空|登机|机场|延误|起飞|降落|到|去|票"),
    "hotel": re.compile(r"酒店|宾馆|住宿|旅馆|民宿|客栈|房|入住|住"),
    "movie": re.compile(r"电影|影片|片|影院|院线|上映|票房|导演|演员|评分|场次|动画|作品|演|票"),
}
"""What a request in Chinese says when it asks about a tool's topic (the word its name says it with, whole): a
weather tool's 天气, 下雨, 冰雹, 带伞. The tools' names and descriptions are English, so the decision's embedder,
across the two languages, puts a Chinese request near a tool by its places and dates: "今天查看北京的新闻" (the news)
went to ``get_current_weather`` at p 0.81 (BFCL's real users' no-call kind, tuning half, 2026-12-06) —
:func:`off_topic`."""
ZH_NAMED_TOPICS = {
    "weather": re.compile(r"天气|气温|下雨|下雪|预报|气象|台风"),
    "news": re.compile(r"新闻|资讯|头条|时事|热点|快讯|热搜"),
    "stock": re.compile(r"股票|股价|股市|行情|证券|基金|大盘|市值|市盈率|收盘|开盘"),
    "flight": re.compile(r"航班|机票|飞机|航空|登机|机场"),
    "hotel": re.compile(r"酒店|宾馆|住宿|旅馆|民宿|客栈|入住"),
    "movie": re.compile(r"电影|影片|影院|院线|上映|票房|导演|演员"),
}
"""The words of two characters or more that name a topic of :data:`ZH_TOPICS` beyond doubt: what a request must say
to name another topic than the tool's (not 钱, 价格, 住, 片: "外滩附近一晚多少钱" is a hotel's question)."""
ZH_OTHER_TOPICS = re.compile(r"房价|楼盘|买房|租房|房租|二手房|餐厅|饭店|美食|菜谱|外卖|快递|物流|彩票|菜价")
"""Topics no tool of :data:`ZH_TOPICS` is named for, that a request may name instead ("北京的房价是多少": the price of
housing, asked beside a weather tool at p 0.69, the same kind)."""


def off_topic(tool: MetonaToolDef, request: str) -> bool:
    """A request in Chinese says nothing of the topic the tool's name holds (:data:`ZH_TOPICS`, a whole word of the
    name: not ``check_stock_level``'s inventory… it is ``stock``, but a request naming no other topic is let be) and
    names another topic instead: the tool is not called. A request with English words in it ("查一下 NVDA 的 stock
    price") is the embedder's to judge; one that names no listed topic (冰雹, 收盘多少, 推荐几部科幻片) is let be. On
    the tuning half every Chinese request whose possible answer calls such a tool says its topic."""
    if not _CJK.search(request) or re.search(r"[A-Za-z]{3,}", request):
        return False
    named = _tool_words(tool.name)
    words = {*named, *map(_singular, named)}
    topics = [t for t in ZH_TOPICS if t in words]
    if not topics or any(ZH_TOPICS[t].search(request) for t in topics):
        return False
    others = [t for t in ZH_NAMED_TOPICS if t not in topics]
    return any(ZH_NAMED_TOPICS[t].search(request) for t in others) or bool(ZH_OTHER_TOPICS.search(request))


def not_the_users(tool: MetonaToolDef, named: set[str], request: str, offered_tools: int) -> bool:
    """A pick that searches the user's own things (:func:`searches_the_users`) for a request that speaks neither of
    the user (:func:`speaks_of_the_user`) nor of what the tool names (``named``, :func:`named_by`), among other
    tools: a question of general knowledge, answered rather than looked up in the user's notes when a second opinion
    agrees (:data:`KNOWLEDGE_PROMPT`). Who wrote a classic novel (asked in Chinese and in English), which solar term
    comes first, and a translation went to the notes search at p 0.58-0.95 (agent-bilingual-v1 and agent-mine-v5,
    tuning sets, 2026-12-05), while each of those sets' eight notes questions speaks of the user ("as my notes say,
    …", "…我记在笔记里了").
    A tool offered alone is the host's choice (the demo's document question with only the notes search offered):
    kept. So is a request that names a thing by a model's name of letters and digits (:data:`_MODEL_NAME`: "the
    Metona X1", "the Q3 plan"): a product or a plan of the user's that an imported document may describe."""
    if offered_tools < 2 or not searches_the_users(tool) or named or speaks_of_the_user(request):
        return False
    return _MODEL_NAME.search(_A_QUOTE.sub(" ", request)) is None


KNOWLEDGE_PROMPT = (
    "Decide what answering the user's question needs.\n"
    "personal: facts about the user's own life that only their notes can tell (their family, home, pets, plans, "
    "purchases, records, what they wrote down or did).\n"
    "general: knowledge anyone can answer (facts, definitions, translations, books, places, science).\n"
    'Reply {"needs": "personal"} or {"needs": "general"}.'
)
"""The system message of the second opinion on a request :func:`not_the_users` reads as general knowledge: the
search of the user's own things is left only when the model says ``general`` (:data:`KNOWLEDGE_LABELS`). On 22
questions (2026-12-05: the notes questions of agent-mine-v6, a tuning set since, that speak of nobody — who a child's
coach is, where a club meets —, the general questions of the tuning sets, and a few written for this) the 1.5B
model said ``general`` of all 11 general ones and of 4 of the 11 personal ones; the 0.5B model said ``personal`` of 18
of the 22."""
KNOWLEDGE_PREFIX = '{"needs": "'
KNOWLEDGE_LABELS = ("personal", "general")

FITS_PROMPT = (
    "You check a tool choice. A user wrote the message below; an assistant may call this tool for it:\n"
    "{tool}\n\n"
    "Think of what exactly the user asks for. Answer yes if this tool gives exactly that (or the data the answer "
    "needs), or does exactly the action asked. Answer no if the user asks for a different fact or quantity than the "
    "tool gives (a price where the tool gives a forecast), a different action, something on another app or service, "
    "or nothing a tool is needed for.\n"
    'Reply {{"fits": "yes"}} or {{"fits": "no"}}.'
)
"""The system message of the second opinion on a first pick the model was unsure of (:data:`FITS_P`,
:func:`fits_prompt`): the tool is not called when the arguments model says ``no``. Asked of the tuning sets'
recorded first calls (2026-12-07: BFCL's and the MCP sets' tuning halves, the three blind sets, the own set; the
held-out half never), the 1.5B model said ``no`` of 72 of the 167 calls made where no offered tool fits ("What is
the frequency of gene variant rs7412…?" beside a dominant-trait calculator, a high-speed train's delay beside a
weather tool), and of 3 of the first 298 right ones ("grab the bucketName output from the prod stack…" beside
Pulumi's stack output tool, a percentage to look up beside a survey tool, a pasted answer beside ``answer_string``);
of agent-bilingual-v1's 38 built-in tool calls, of 3 reads of a file the request names, which are never asked. It
still calls "Who is the most assist player in Premier League?" fitting a top scorer's tool. A first wording (answer
no for "another quantity, another action, another service") said ``no`` of 43 of the 167 and of 3 of the 487 right
ones; on blind-v4's first run (a set over 8 servers no other set uses, blind) it turned 8 of its 50 no-call requests
from a call to none and one right pick (``export_citations`` for "bibtex for 1706.03762 and 1810.04805 please")
away."""
FITS_PREFIX = '{"fits": "'
FITS_LABELS = ("yes", "no")
FITS_P = 0.9
"""A first pick the model gave less than this probability (or named only on a second look after "answer") gets the
second opinion of :data:`FITS_PROMPT`: of the 72 calls it turned down where none fits, 69 were picked below it (the
other three at p 0.91-0.95), as were the three right calls it turned down, while a third of the right first picks
(159 of 487) were picked above it and are not asked — a generation of the arguments model saved."""
FITS_DESCRIPTION = 400
FITS_PARAMETERS = 8


CHOOSE_PROMPT = (
    "You check a tool choice. A user wrote the message below; an assistant may call one of these tools for it:\n"
    "{tools}\n\n"
    "Think of what exactly the user asks for. Name the tool that gives exactly that (or the data the answer needs), "
    "or does exactly the action asked. Answer none if the user asks for a different fact or quantity than any tool "
    "gives (a price where a tool gives a forecast), a different action, something on another app or service, or "
    "nothing a tool is needed for.\n"
    'Reply {{"tool": "<name>"}} or {{"tool": "none"}}.'
)
"""The question after a second opinion's ``yes`` (:data:`FITS_PROMPT`) on an unsure pick among several offered
tools: which of the pick and its nearest lookalikes (:func:`lookalikes`), shown alike, does what is asked — or none.
Asked on its own (a fresh prompt), not after the ``yes`` in its conversation: there the model kept its pick
(blind-v4, tuning: 1 of the 4 lookalike misses named right, one right pick lost, against 3 of 4 and one)."""
CHOOSE_PREFIX = '{"tool": "'
CHOOSE_NONE = "none"
NAME_TOKENS = 24
"""The tokens a tool's name is written in, at most (a decision, a choice among lookalikes)."""
LOOKALIKES = 3
LOOKALIKE_MARGIN = 0.12
"""An offered tool is a lookalike of the pick when the embedder puts it at least this near the request as the pick,
less this margin (or nearer). Of the choices asked on the tuning sets (blind-v4's 50 + 50, 32 of BFCL's tuning
cases) and BFCL live's wrong first picks among lookalikes (its tuning cases from the 161st), every tool the choice
rightly named, and every right tool a wrong pick stood for, was within 0.12 of the pick (``find_dsns`` 0.11 below
``create_dsn``, ``Trains_1_FindTrains`` above ``GetTrainTickets``); the picks whose nearest other tool was further
(``magnetic_field_calculate`` 0.71 beside ``electric_field_calculate`` 0.48) were all kept — a choice that cost 2-5 s
each for nothing."""


def lookalikes(tool: MetonaToolDef, tools: Sequence[MetonaToolDef], near: dict[str, float]) -> list[MetonaToolDef]:
    """``tool`` (the pick) and after it the offered tools nearest the request (by ``near``), :data:`LOOKALIKES` in
    all — when the nearest of them is about as near as the pick is (:data:`LOOKALIKE_MARGIN`); the pick alone when
    none is. The two nearest are shown even when only one is that near: shown only the near one, the model named
    ``llen`` for "show me the first 10 items in the jobs:pending list" picked ``lrange`` (blind-v4, tuning), which
    beside a third tool it kept."""
    others = sorted((t for t in tools if t.name != tool.name and t.name in near), key=lambda t: -near[t.name])
    if not others or (tool.name in near and near[others[0].name] < near[tool.name] - LOOKALIKE_MARGIN):
        return [tool]
    return [tool, *others[: LOOKALIKES - 1]]


def refused(tool: MetonaToolDef, messages: Sequence[MetonaMessage]) -> bool:
    """What a first pick is kept from before its second opinion, judged of ``tool``: off the request's topic
    (:func:`off_topic`), a read of a file made up for a quoted text (:func:`reads_a_guess`), an action for a question
    (:func:`asks_not_does`), its own inputs asked for (:func:`asks_its_inputs`), a change for a how-to question. A
    lookalike the choice names that is refused so is not taken: the pick stays."""
    asked = question(messages)
    return (
        off_topic(tool, asked)
        or reads_a_guess(tool, messages)
        or asks_not_does(tool, asked)
        or asks_its_inputs(tool, messages)
        or (changes_things(tool) and asks_how_to(asked))
    )


def choose_prompt(tools: Sequence[MetonaToolDef]) -> str:
    """:data:`CHOOSE_PROMPT` for ``tools``: each one as :func:`fits_prompt` shows one (:func:`_shown`)."""
    return CHOOSE_PROMPT.format(tools="\n\n".join(_shown(tool) for tool in tools))


def fit_asked(score: float | None) -> bool:
    """A first pick given less than :data:`FITS_P` (or no score) is asked about (:data:`FITS_PROMPT`)."""
    return not (_known(score) and score >= math.log(FITS_P))


def fits_prompt(tool: MetonaToolDef) -> str:
    """:data:`FITS_PROMPT` for ``tool``, shown as :func:`_shown` shows it."""
    return FITS_PROMPT.format(tool=_shown(tool))


def _shown(tool: MetonaToolDef) -> str:
    """A tool as a second opinion is shown it: its name, its description (the first :data:`FITS_DESCRIPTION`
    characters) and its first :data:`FITS_PARAMETERS` parameters with the first 80 characters of each one's
    description."""
    declared = tool.parameters.model_dump(mode="json", exclude_none=True).get("properties") or {}
    parameters = "; ".join(
        f"{key}: {str(field.get('description', ''))[:80]}" for key, field in list(declared.items())[:FITS_PARAMETERS]
    )
    return f"Tool: {tool.name}\nWhat it does: {tool.description[:FITS_DESCRIPTION]}\nIts parameters: {parameters}"


def taken_from(tools: Sequence[MetonaToolDef], text: str) -> MetonaToolDef | None:
    """The one offered tool that searches the user's own things (:func:`searches_the_users`) that the request
    ``text`` names as where what it asks for is to be taken from: a word of the tool's own (:func:`named_by`, the
    files it names left out) after "from", "in", "out of", "according to" ("from my notes"), or a Chinese one before
    里, 中 ("笔记里"). "Copy my OBS stream settings from my notes into stream-settings.txt": the named file narrowed
    the first step to the file tools, and the write was of a placeholder (agent-mine-v7, a tuning set, 2026-12-06).
    None when there is not exactly one."""
    bare = text
    for path in named_paths(text):
        bare = bare.replace(path, " ")
    named = named_by(tools, bare)
    found = []
    for tool in tools:
        if not searches_the_users(tool):
            continue
        for word in named.get(tool.name) or ():
            english = rf"\b(?:from|in|out of|according to)\s+(?:(?:my|our|the|your)\s+)?(?:[\w-]+\s+)?{word}s?\b"
            chinese = [c for c, e in ZH_WORDS.items() if e == word]
            if re.search(english, bare, re.IGNORECASE) or any(re.search(c + "[里中内]", bare) for c in chinese):
                found.append(tool)
                break
    return found[0] if len(found) == 1 else None


_RECALLING = re.compile(
    r"\bagain\s*[?？]|\bremind me\b|\bI\s+(?:forgot|forget|can['’]?t remember|don['’]?t remember)\b"
    r"|来着|上次|上回|忘了",
    re.IGNORECASE,
)
"""How a request asks after what the one asking knew once ("what's the office printer's IP again?", "remind me, …",
"…是多少来着？", "上次那个…", "忘了…"): a thing of their own, or a fact anyone knows they forgot (the second opinion
tells which, :data:`KNOWLEDGE_PROMPT`)."""


def recalls(text: str) -> bool:
    """``text`` asks after what the one asking knew once (:data:`_RECALLING`), outside what it quotes."""
    return _RECALLING.search(_TITLE.sub(" ", _A_QUOTE.sub(" ", text))) is not None


def spoken_of_as_theirs(tools: Sequence[MetonaToolDef], request: str) -> set[str]:
    """The offered tools that search the user's own things (:func:`searches_the_users`) when the request speaks of
    the user (:func:`speaks_of_the_user`): "my notes", "我的笔记" name the notes search as much as two of its words
    would (:func:`named_instead`)."""
    return {t.name for t in tools if searches_the_users(t)} if speaks_of_the_user(request) else set()


_NOW = re.compile(r"\b(?:now|currently|at the moment|today|tonight)\b|现在|此刻|目前|今天|今晚", re.IGNORECASE)
"""A request about the present moment (:func:`of_their_own`): what no record of the user's holds."""


def of_the_present(text: str) -> bool:
    """``text`` speaks of the present moment (:data:`_NOW`: now, today, 现在, 今天…)."""
    return _NOW.search(text) is not None


def of_their_own(
    choice: MetonaToolDef, named: set[str], tools: Sequence[MetonaToolDef], score: float | None, request: str
) -> str | None:
    """The one offered tool that searches the user's own things (:func:`searches_the_users`) to call instead of
    ``choice``, a first pick the model is unsure of (:func:`sure`) that searches none and that the request names
    nothing of (``named``, :func:`named_by`), when the request asks one fact (:func:`asks_a_fact`) of the user's own
    life (:func:`speaks_of_the_user`), states no number of its own (:func:`_own_numbers`), speaks of no file or
    folder and not of the present moment (:data:`_NOW`): what only the user's own records can tell, which no other
    tool computes or fetches. None to keep it. Questions after a setting the user once noted down (a recipe's
    amount, a boiler's pressure, a camera's exposure) went to the calculator at p 0.37-0.59 with the numbers made
    up, and were then answered from memory (agent-mine-v6, a tuning set, 2026-12-05). The caller asks the second
    opinion of :data:`KNOWLEDGE_PROMPT` first: a general question that says "I" in passing (a capital the user
    always mixes up) had gone to the calculator too, and is no search of the user's notes."""
    if sure(score) or named or searches_the_users(choice) or not asks_their_own(request):
        return None
    own = [t.name for t in tools if searches_the_users(t)]
    return own[0] if len(own) == 1 else None


def asks_their_own(request: str) -> bool:
    """``request`` asks one fact (:func:`asks_a_fact`) of the user's own life (:func:`speaks_of_the_user`) or one
    they knew once (:func:`recalls`), states no number of its own (:func:`_own_numbers`), speaks of no file or folder
    and not of the present moment (:data:`_NOW`): what only the user's own records may tell (:func:`of_their_own`;
    a pick of the search of those records the model is unsure of, far from the request, is called when the second
    opinion agrees)."""
    if not ((speaks_of_the_user(request) or recalls(request)) and asks_a_fact(request)) or _own_numbers(request):
        return False
    return not (_FILE_WORDS.search(request) or speaks_of_folders(request) or of_the_present(request))


def _known(score: float | None) -> TypeGuard[float]:
    """A decision's score that can be compared (the runtime reports none, or nan, for some generations)."""
    return score is not None and math.isfinite(score)


def query_text(messages: Sequence[MetonaMessage]) -> str:
    """What the tools are ranked for: the last user message and the turn's latest tool result (what a next call
    would work on), each at most :data:`QUERY_CHARS` characters."""
    results = [m for m in messages[turn_start(messages) :] if m.role == "tool"]
    latest = tool_text(results[-1]) if results else ""
    return "\n".join(t[:QUERY_CHARS] for t in (question(messages), latest) if t)


def ranked(tools: Sequence[MetonaToolDef], similarities: Sequence[float]) -> list[MetonaToolDef]:
    """The tools by decreasing similarity to the request; equal ones keep the offered order."""
    order = sorted(range(len(tools)), key=lambda i: -similarities[i])
    return [tools[i] for i in order]


def _literal(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_SPECIAL else c for c in text)


def label_regex(labels: Sequence[str]) -> str:
    """What a second opinion may write after its prefix: one of ``labels``, each literally (a tool's name may hold
    ``.`` or ``+``)."""
    return "(" + "|".join(_literal(label) for label in labels) + ")"


def choice_regex(names: Sequence[str], *, answer: bool = True) -> str:
    """What the decision may write after :data:`DECISION_PREFIX`: ``answer`` (unless not ``answer``) or one of
    ``names``, then ``"``."""
    choices = "|".join(_literal(n) for n in ((ANSWER,) if answer else ()) + tuple(names))
    return f"({choices})" + '"'


CALL_MARGIN = math.log(0.8)
"""How much likelier (log-probability) than ``answer`` the model's likeliest tool must be at a first decision that
said ``answer`` for that tool to be called instead (:func:`worth_calling`): at least 0.8 times as likely. On the
tuning half of scripts/bench/bench_tool_generalisation.py (2026-12-03) the model answered 5 of 131 requests that
needed a tool and 36 of 72 that needed none; asked again without ``answer``, the tool it named was 0.53–0.86
times as likely as its ``answer`` for the five, and at most 0.76 times for the 36 but for none above 0.8 (two
of the five pass)."""


NEAR_COSINE = 0.3
NEAR_MARGIN = math.log(0.5)
"""The second look's bar for a tool whose own summary is near the request (cosine at least :data:`NEAR_COSINE`):
at least half as likely as ``answer`` (:func:`worth_calling`). On the tuning half (2026-12-04, 60 a kind, decisions
only) 9 requests that needed a tool were answered first; 4 of them were a tool at 0.52–0.77 times ``answer`` and
cosine 0.31–0.60 ("What is the third major chord in C major scale?" → get_third_chord, "Evaluate 2**10 - 1" →
calculate), of 76 that needed none one is in that corner (0.76, cosine 0.42)."""


def worth_calling(
    answer_score: float | None, tool_score: float | None, cosine: float | None = None, *, commanded: bool = False
) -> bool:
    """A first decision said ``answer`` with log-probability ``answer_score``; asked again without ``answer``, the
    model named a tool with ``tool_score``, its summary at ``cosine`` from the request: the tool is called when
    ``tool_score - answer_score`` reaches :data:`CALL_MARGIN` and the cosine :data:`RELEVANT_COSINE`, or
    :data:`NEAR_MARGIN` and :data:`NEAR_COSINE` — or :data:`NEAR_MARGIN` alone where the request is a command that
    begins with the tool's own verb (``commanded``: :func:`begins_with_its_verb`)."""
    if not (_known(answer_score) and _known(tool_score)) or cosine is None:
        return False
    margin = tool_score - answer_score
    near = cosine >= NEAR_COSINE or commanded
    return (margin >= CALL_MARGIN and cosine >= RELEVANT_COSINE) or (margin >= NEAR_MARGIN and near)


_BARE_VERBS = frozenset("get make do check show tell give let help fix run set put use".split())
"""Verbs that say nothing of what a tool does: "Get my thoughts in order", "Run my numbers by me"
(:func:`begins_with_its_verb`)."""
_COMMAND = re.compile(
    r"\s*(?:(?:can|could|would) you\s+)?(?:(?:please|kindly)\s+)?([A-Za-z]+)\s+(?:(?:through|in)\s+)?(?:my|our)\b", re.I
)
"""A request that is a command on the user's own things: a verb, then "my" or "our" ("Search my memory for…",
"Please search our wiki…"): :func:`begins_with_its_verb`."""


def begins_with_its_verb(asked: str, tool: str, names: Sequence[str]) -> bool:
    """The request ``asked`` is a command on the user's own things (:data:`_COMMAND`) whose verb begins ``tool``'s
    name (after a plugin's ``plugin__`` prefix) and no other offered tool's (of ``names``): "Search my memory for
    anything about sourdough." offered ``search_nodes``. At a first decision that said ``answer``, the second look's
    likeliest tool is then called when it is at least half as likely as ``answer`` however far the embedder puts it
    (:func:`worth_calling`): the 0.5B model had answered it at p 0.52 (the tool 0.32, its summary 0.13 from the
    request). Of 136 recorded first decisions of the tuning half that said ``answer`` (2026-12-06; BFCL's no-call
    kinds among them), this was the only one whose request so begins. "Find the derivative of x^2", "Play a word
    game with me", "Slack is so distracting" are no such command, nor one whose verb says nothing of what is done
    (:data:`_BARE_VERBS`: "Check my essay for grammar" offered ``check_weather``, "Tell my boss I'm sick" →
    ``tell_joke``)."""
    command = _COMMAND.match(asked)
    if command is None or command.group(1).lower() in _BARE_VERBS:
        return False
    verb = command.group(1).lower()

    def first_word(name: str) -> str:
        return (_tool_words(name.rsplit("__", 1)[-1]) or [""])[0]

    return first_word(tool) == verb and [first_word(n) for n in names].count(verb) == 1


def confident(score: float | None) -> bool:
    """The decision's score (the log-probability the model itself gave the name it wrote) clears
    :data:`NEXT_TOOL_MIN_P`; no score is no confidence."""
    return _known(score) and score >= math.log(NEXT_TOOL_MIN_P)


NEXT_PART_MIN_P = 0.5
NEXT_PART_COSINE = 0.1
"""What remains of a request after the turn's calls (:func:`what_remains`) is done by a tool that computes
(:func:`computes`) when the model, shown that part and the results, names the tool at p ≥ :data:`NEXT_PART_MIN_P`
and the part is at least :data:`NEXT_PART_COSINE` from the tool's summary (:func:`sure_of_next`). On 15 two-step
requests written for this (2026-12-05, read or list, then compute or answer from the content), the 0.5B model's
pick of the calculator had p 0.69-0.86 and cosine 0.11-0.42 where a sum, an average or a difference was asked;
where the content itself answered ("what's on the list", "the main points", "who is on call") p reached 0.76
but the cosine stayed under 0.09."""


def sure_of_next(score: float | None, cosine: float | None) -> bool:
    """A pick for what remains of a request is called (:data:`NEXT_PART_MIN_P`, :data:`NEXT_PART_COSINE`)."""
    return _known(score) and score >= math.log(NEXT_PART_MIN_P) and cosine is not None and cosine >= NEXT_PART_COSINE


def decision_of(text: str, names: Sequence[str]) -> str | None:
    """The name the decision wrote (``answer`` or a tool), None when the text is not a decision."""
    match = re.fullmatch(r'\s*\{"tool": "([^"]*)"\s*', text)
    if match is None or match.group(1) not in (ANSWER, *names):
        return None
    return match.group(1)


def arguments_prefix(decision_text: str) -> str:
    """The decision's reply, continued up to where the arguments object begins."""
    return decision_text.rstrip() + ', "arguments": '


def arguments_schema(
    parameters: dict[str, Any], *, top: bool = True, numbers: Sequence[int | float] = ()
) -> dict[str, Any]:
    """The tool's parameter schema reduced to what constrains the output (types, enums, properties, required,
    items — nested objects and arrays too, as the IR extension ``properties``/``required`` carries them);
    descriptions and defaults dropped; objects that declare their keys closed (no property the tool does not
    declare), a nested object that declares none left open.

    An optional number may only be one of ``numbers``, the numbers the request states (:func:`stated_numbers`),
    and is left out when it states none (its default applies): a free number is unbounded in the grammar, and the
    0.5B model was measured writing ``"top_k": 100000000000…`` until the token limit; allowed whenever the
    request held a digit (tried 2026-12-03), it did so again for "How long is the warranty of the Metona X1?"
    (the ``1`` of ``X1``). Left out always, "run it for 10 seconds in 5 steps" got ``{}``."""
    out: dict[str, Any] = {k: v for k, v in parameters.items() if k in _KEEP and k not in ("properties", "items")}
    if isinstance(parameters.get("properties"), dict):
        required = set(parameters.get("required") or ())
        out["properties"] = {}
        for key, spec in parameters["properties"].items():
            if not isinstance(spec, dict):
                continue
            if key in required and (choices := number_choices(spec)):
                out["properties"][key] = {"type": "number", "enum": choices}
            elif key in required or spec.get("type") not in _STATED_ONLY:
                out["properties"][key] = arguments_schema(spec, top=False, numbers=numbers)
            elif numbers and not spec.get("enum"):
                fitting = _allowed(numbers, spec)
                if fitting:
                    out["properties"][key] = {"type": spec["type"], "enum": fitting}
    for key, spec in (parameters.get("properties") or {}).items():
        named = _named_values(spec)
        if named:  # int | Literal["all"]: the number as above, or one of its named values
            kept = out["properties"].get(key)
            out["properties"][key] = {"anyOf": [kept, {"enum": named}]} if kept else {"enum": named}
    if isinstance(parameters.get("items"), dict):
        out["items"] = arguments_schema(parameters["items"], top=False, numbers=numbers)
        if (most := _most_items(parameters)) is not None:
            out["maxItems"] = most
    if top or "properties" in out:
        out.setdefault("type", "object")
        out.setdefault("properties", {})
        out["additionalProperties"] = False
        if "required" in out:
            out["required"] = [r for r in out["required"] if r in out["properties"]]
    return out


_NUMBERS = ("number", "integer")
_GIVEN = r"\s*[=:]?\s*(?:about\s+)?[$€£¥]?"
_ITS_OWN = rf"(?:\s+(?:of|is|was|equals))?{_GIVEN}"
"""After a key's words in the request, what gives it its number: "a length of 50", "distance is 8 meters", "radius:
3" (:func:`_keys_said_with`)."""
_ITS = rf"(?:\s+(?:of|is|was|equals|at))?{_GIVEN}"
"""As :data:`_ITS_OWN`, and "at" ("speed at 50"): for the order keys are said in, not for whose number it is ("a
capacitance at 12 V" gives no capacitance of 12: :func:`_numbers_of_keys`)."""


def _keys_said_with(properties: dict[str, Any], text: str, its: str) -> dict[str, list[re.Match[str]]]:
    """Each number argument of ``properties`` (a name of three letters or more) and where the lower-case ``text``
    says its words, then a number after ``its`` (:data:`_ITS_OWN`, :data:`_ITS`): the number is the match's group."""
    found: dict[str, list[re.Match[str]]] = {}
    for key, spec in properties.items():
        words = " ".join(_name_words(key))  # initial_velocity, initialVelocity: "initial velocity"
        if isinstance(spec, dict) and spec.get("type") in _NUMBERS and len(words) >= 3:
            pattern = rf"(?<![\w-]){re.escape(words)}{its}(-?\d[\d,]*(?:\.\d+)?)"
            found[key] = list(re.finditer(pattern, text))
    return found


def in_the_order_said(schema: dict[str, Any], asked: str) -> dict[str, Any]:
    """``schema`` with its number arguments that the request ``asked`` gives (a key's words, then its number:
    :data:`_ITS`) in the order the request gives them, each in a place one of them held (the others keep
    theirs): the grammar writes keys in the schema's order, and the 1.5B model wrote "a length of 50 meters and a
    width of 30" as ``{"width": 50, "length": 30}`` — the first number for the first key."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    found = _keys_said_with(properties, asked.lower(), _ITS)
    said = {key: matches[0].start() for key, matches in found.items() if matches}
    if len(said) < 2:
        return schema
    keys = list(properties)
    slots = [i for i, key in enumerate(keys) if key in said]
    for slot, key in zip(slots, sorted(said, key=said.__getitem__), strict=True):
        keys[slot] = key
    if keys == list(properties):
        return schema
    return {**schema, "properties": {key: properties[key] for key in keys}}


def _most_items(array: dict[str, Any]) -> int | None:
    """The most items an array argument is written with: its own ``maxItems``, and for items that are one of an
    enum no more than the enum has values — a choice of several options names each once (BFCL's
    ``details: ["field goal %", "free throw %"]`` was written over and over until the loop guard cut the call)."""
    declared = array.get("maxItems")
    most = declared if isinstance(declared, int) and not isinstance(declared, bool) and declared >= 0 else None
    values = array["items"].get("enum")
    if isinstance(values, list) and values:
        most = len(values) if most is None else min(most, len(values))
    return most


_MINOR_UNITS = re.compile(
    r"\b(?:in|of) cents\b|\(cents\)|smallest currency unit|minor units?|\bin pence\b|lowest denomination"
    r"|以分为单位|单位为分",
    re.IGNORECASE,
)
_MONEY = re.compile(
    r"[$€£]\s?(\d[\d,]*(?:\.\d+)?)|(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?(?:dollars?|bucks|euros?|pounds?|usd|eur|gbp|"
    r"cad|aud|美元|欧元|英镑|元|块)(?![a-z])",
    re.IGNORECASE,
)
_WORKED_OUT_MONEY = re.compile(
    r"\b(?:half|third|quarter|minus|less|plus|each|per|off|discount|percent|cents?|times|split|except|but)\b|%|"
    r"\d\s?[kKmMbB]\b|\d[,.]\d{3}[,.]\d|一半|打折|折|每|减|扣|加上|除了|分之",
    re.IGNORECASE,
)
"""What makes an amount worked out from the one stated (half of it, less a fee, each, 15% off), said in cents
already, or written in another convention (``$1.2k``, ``1.234,56``): not constrained (:func:`in_minor_units`)."""
_WHOLE_UNIT_CURRENCY = re.compile(r"¥|円|\byen\b|\bjpy\b|\bkrw\b|\bwon\b|日元|韩元", re.IGNORECASE)


def in_minor_units(schema: dict[str, Any], parameters: dict[str, Any], text: str) -> dict[str, Any]:
    """The arguments ``schema`` (:func:`arguments_schema`) with a number the tool takes in a currency's minor unit
    (its description: "The amount to refund in cents.", "in the smallest currency unit") constrained to the money
    amounts the request ``text`` states, times 100: "Please refund $12.50 of payment intent pi_…" offered Stripe's
    ``create_refund(amount: integer, "in cents")`` ran ``12500000000000000…`` to the grammar's bound and the refund
    was not made (a blind set of other people's tools, 2026-12-06); ``1250`` now. Only where the request states one
    amount of money and works nothing out from it (:data:`_WORKED_OUT_MONEY`: a review, 2026-12-06, found "Refund
    half of the $50 charge", "$15 each for 3 tickets", "€12,50" constrained to the wrong amount), and not in a
    currency without a minor unit (yen, won)."""
    written = [m.group(1) or m.group(2) for m in _MONEY.finditer(text)]
    if len(written) != 1 or _WHOLE_UNIT_CURRENCY.search(text) or _WORKED_OUT_MONEY.search(text):
        return schema  # one amount, as stated: not "half of the $50", "$12.50 minus the $2 fee", "€12,50", "$5M"
    if re.fullmatch(r"\d+,\d{1,2}", written[0]) or not isinstance(schema.get("properties"), dict):
        return schema
    cents = [round(float(written[0].replace(",", "")) * 100)]
    out = {**schema, "properties": dict(schema["properties"])}
    for key, spec in (parameters.get("properties") or {}).items():
        if not isinstance(spec, dict) or spec.get("enum") or spec.get("type") not in ("integer", "number"):
            continue
        if key in out["properties"] or key in (parameters.get("required") or ()):
            if _MINOR_UNITS.search(str(spec.get("description") or "")) or _name_words(key)[-1:] == ["cents"]:
                out["properties"][key] = {"type": spec["type"], "enum": cents}
    return out


def _named_values(spec: Any) -> list[Any]:
    """The named values a number or a boolean field also takes, as the tool registry's hints write them
    (``(integer, or "all", default 100)``: :func:`sidecar.agent.tools.registry.param_field`, a union such as
    Docker's ``tail: int | Literal["all"]``)."""
    if not isinstance(spec, dict) or spec.get("type") not in ("number", "integer", "boolean"):
        return []
    for hint in _hint_items(str(spec.get("description") or "")):
        if hint.startswith("or "):
            try:
                return [json.loads(v) for v in hint.removeprefix("or ").split("|")]
            except ValueError:
                return []
    return []


_RUNAWAY = re.compile(r"\d{16,}\s*$")


def read_arguments(text: str, finish: object) -> tuple[dict[str, Any] | None, object]:
    """The arguments the constrained step wrote (:func:`parse_arguments`) and how it ended: ``finish`` as the
    runtime gave it, or ``runaway`` when a number ran on past what a double holds — cut short in it (the runtime's
    own JSON-schema constraint bounds no number) or stopped by the grammar's bound (:mod:`..localmodel.jsongrammar`),
    in which case the arguments are not taken either (:func:`stated_only` may try again)."""
    parsed = parse_arguments(text)
    if parsed is None:
        return None, "runaway" if _RUNAWAY.search(text) else finish
    if jsongrammar.runaway(parsed):
        return None, "runaway"
    return parsed, finish


_OPENED_LIST = re.compile(r'"((?:[^"\\]|\\.)+)"\s*:\s*\[')


_PEOPLE = frozenset(
    "attendees attendee cc bcc to recipients recipient assignees assignee reviewers reviewer participants members "
    "invitees guests users people emails contacts owners watchers followers mentions".split()
)
"""A list of people (those to invite, copy, assign): never left out of a call, whoever the user named them as ("with
Ana and Raj" → their addresses)."""


def looping_list(text: str, schema: dict[str, Any], declared: dict[str, Any], said: str = "") -> str | None:
    """The optional list argument the arguments ``text``, ended by the loop guard, was still writing: the key of the
    last list opened at the top of the object and never closed, when the tool (``declared``) does not require it,
    ``schema`` (what was decoded) declares it a list, and none of the items written so far is one the request
    (``said``) names. "How's the air in Delhi right now? It's at 28.61, 77.21" offered open-meteo's ``air_quality``
    got ``current: ["pm2_5", "pm10", "ozone", "nitrogen_dioxide", "pm2_5", …]`` until the guard stopped it, and the
    call was dropped (a request of this project's own MCP tuning set, 2026-12-06): the arguments are written once more
    without that list, whose default applies. A list of things the user named (the labels to set) or of people
    (:data:`_PEOPLE`: attendees, cc, assignees, however the user named them), a looping required argument, or any
    other value (a made-up code of digits) is not left out: the call is dropped and the user told."""
    depths = list(_depths(text))  # one walk: the depth before each list opened is read from it
    opened = [m for m in _OPENED_LIST.finditer(text) if (depths[m.start() - 1] if m.start() else 0) == 1]
    if not opened:
        return None
    last = opened[-1]
    key = last.group(1)
    spec = (schema.get("properties") or {}).get(key) or {}
    if key in (declared.get("required") or ()) or spec.get("type") != "array" or set(_name_words(key)) & _PEOPLE:
        return None
    rest = text[last.end() :]
    if _closes(rest):
        return None  # closed after all
    items = re.findall(r'"((?:[^"\\]|\\.)*)"', rest)
    lowered = said.lower()
    if any(item.strip() and item.strip().lower() in lowered for item in items):
        return None  # items the user named: theirs, not to be left out
    return key


def without_lists(schema: dict[str, Any], declared: dict[str, Any], looped: str, said: str) -> dict[str, Any]:
    """``schema`` for a second try after the optional list ``looped`` started over (:func:`looping_list`): without it,
    nor any other optional top-level list whose name the request (``said``) does not speak of — asked again without
    open-meteo's ``current``, the model filled ``hourly`` with every variable to the token limit (this project's own
    MCP tuning set, 2026-12-06). A list the request names ("hourly temperature") is kept."""
    words = _words(said)
    required = set(declared.get("required") or ())
    out = without_argument(schema, looped)
    for key, spec in (schema.get("properties") or {}).items():
        if key == looped or key in required or not isinstance(spec, dict) or spec.get("type") != "array":
            continue
        if not any(_said(word, words) for word in _name_words(key)):
            out = without_argument(out, key)
    return out


def _depths(text: str) -> Iterator[int]:
    """How many objects and lists are open after each character of JSON ``text`` (strings aside)."""
    depth, quoted, escaped = 0, False, False
    for char in text:
        if quoted:
            quoted, escaped = (not (char == '"' and not escaped), char == "\\" and not escaped)
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        yield depth


def _closes(rest: str) -> bool:
    """The list whose ``[`` ``rest`` follows is closed within it: its depth falls below where it started."""
    return any(depth < 0 for depth in _depths(rest))


def stated_only(
    schema: dict[str, Any], declared: dict[str, Any], numbers: Sequence[int | float]
) -> dict[str, Any] | None:
    """``schema`` (an :func:`arguments_schema` of the tool's ``declared`` parameters) with each top-level number that
    may be any number made one of the ``numbers`` the request states (those its declaration allows, :func:`_fits`),
    None when there is none to so restrict or the request states no number. The second try of arguments cut short:
    a free number is unbounded, and the 1.5B model, asked for "100 million outstanding shares", wrote
    ``1000000000…`` to the token limit, one digit token after another (BFCL multiple_127, a tuning case). Tried only
    when the request writes a number with a word of scale (:func:`scaled_numbers`): a runaway number otherwise is a
    call the model was lost in, and on the held-out half a retry for every runaway number made one more call where
    none fitted (2026-12-05)."""
    properties = dict(schema.get("properties") or {})
    free = [k for k, spec in properties.items() if spec.get("type") in _STATED_ONLY and "enum" not in spec]
    restricted = {k: _allowed(numbers, _spec(declared, k)) for k in free}
    if not any(restricted.values()):
        return None
    for key, fitting in restricted.items():
        if fitting:
            properties[key] = {"type": properties[key]["type"], "enum": fitting}
    return {**schema, "properties": properties}


_HINTS = re.compile(r"\(([^()]*)\)\s*$")
_RANGE = re.compile(r"^(-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)$")
_BOUND = re.compile(r"^(>=|>|<=|<) (-?\d+(?:\.\d+)?)$")


def _hint_items(description: str) -> list[str]:
    """The hints the tool registry appends to a field's description, one each: ``(integer, 1-10, default 3)`` →
    ``integer``, ``1-10``, ``default 3``."""
    hints = _HINTS.search(description)
    return [h.strip() for h in hints.group(1).split(",")] if hints else []


def _choices(hint: str) -> list[int | float]:
    """The numbers of a hint ``one of 1|2|3`` (a number field's enum, which the IR's string ``enum`` cannot
    carry)."""
    out: list[int | float] = []
    for part in hint.removeprefix("one of ").split("|"):
        try:
            value = float(part)
        except ValueError:
            continue
        out.append(int(value) if value.is_integer() and "." not in part else value)
    return out


def number_choices(spec: dict[str, Any]) -> list[int | float]:
    """The numbers a ``number`` field's hints allow it alone (``(integer, one of 1|2|3|4|5, default 1)``), empty
    where they allow any."""
    if spec.get("type") != "number":
        return []
    return next((_choices(h) for h in _hint_items(str(spec.get("description") or "")) if h.startswith("one of ")), [])


def _allowed(numbers: Sequence[int | float], spec: dict[str, Any]) -> list[int | float]:
    """The ``numbers`` a declaration's hints allow its field (:func:`_fits`)."""
    return [n for n in numbers if _fits(n, str(spec.get("description") or ""))]


def _fits(number: int | float, description: str) -> bool:
    """``number`` is allowed by what a declaration's description says of its field in the hints the tool registry
    appends (``(integer, 1-10, default 3)``, ``(>= 0)``): the IR's number has no integer-ness and no bounds, so an
    MCP tool's ``count`` (integer, 1–10) was offered the request's ``2.5`` and ``1299.99``."""
    for hint in _hint_items(description):
        if hint == "integer" and not float(number).is_integer():
            return False
        if hint.startswith("one of ") and number not in _choices(hint):
            return False
        if (span := _RANGE.match(hint)) and not float(span.group(1)) <= number <= float(span.group(2)):
            return False
        if bound := _BOUND.match(hint):
            limit = float(bound.group(2))
            ok = {">=": number >= limit, ">": number > limit, "<=": number <= limit, "<": number < limit}
            if not ok[bound.group(1)]:
                return False
    return True


_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.:/-])(-?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
    r"(?![\d_]|[.:-][A-Za-z0-9]|/(?:\d|[\w-]+(?:[/\\]|\.[A-Za-z]))|[eE][-+]?\d)",  # $14.99/month: a rate, not a path
    re.ASCII,
)
STATED_NUMBERS = 8
"""Most numbers :func:`stated_numbers` offers (the first ones the request states)."""


_ASCII_DIGITS = str.maketrans("０１２３４５６７８９．－−", "0123456789.--")
"""Full-width digits, point and minus (``３天``, ``５．５小时``, ``－5度``) and the minus sign ``−`` as ASCII."""


_EN_UNITS = {w: i for i, w in enumerate(
    "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen".split(), start=2)}  # fmt: skip
_EN_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_TENS, _ONES, _UNITS = "|".join(_EN_TENS), "|".join(list(_EN_UNITS)[:8]), "|".join(_EN_UNITS)
_EN_NUMBER = re.compile(rf"\b(?:({_TENS})(?:[- ]({_ONES}))?|({_UNITS})|(hundred|dozen))\b", re.IGNORECASE)
_ZH_DIGITS = {c: i for i, c in enumerate("一二三四五六七八九", start=1)} | {"两": 2}
_ZH_NUMBER = re.compile(
    r"(?<![第\d一二三四五六七八九十两百千万零])((?:[二三四五六七八九两]?十[一二三四五六七八九]?)|[二三四五六七八九两])"
    r"(?=(?:个|条|项|篇|本|页|行|张|份|位|名|件|首|部|次|遍|天|周|小时|分钟|秒|年|岁|人|家|种|句|段|步))"
)
"""Numbers in words a request states: English two to ninety-nine, "hundred", "dozen" ("one" and "a" are left
out: "which one", "one of"); Chinese 二 to 九十九 before a measure word (``五个``, ``十条``, ``前二十行``; not
``一``, an ordinal ``第五个``, a part of a larger numeral, ``五月``, ``星期五``, ``十分``)."""


def _zh_value(word: str) -> int:
    if "十" not in word:
        return _ZH_DIGITS[word]
    tens, _, ones = word.partition("十")
    return 10 * (_ZH_DIGITS[tens] if tens else 1) + (_ZH_DIGITS[ones] if ones else 0)


_SCALE = re.compile(r"[ \t]*(?:(thousand|million|billion|trillion)\b|(万|亿))", re.IGNORECASE)
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12, "万": 10**4, "亿": 10**8}
"""Words that scale the number before them: "100 million" is 100000000, "3.5万" 35000, "5万米" 50000 (metres)."""


def _scaled(text: str) -> list[tuple[int, str, int | float]]:
    """Each number with the word that scales it (:data:`_SCALE`): its place, as written, its value."""
    out: list[tuple[int, str, int | float]] = []
    for match in _NUMBER.finditer(text):
        sign, digits, fraction = match.groups(default="")
        scale = _SCALE.match(text, match.end())
        if scale is None:
            continue
        exact = Decimal(sign + digits.replace(",", "") + fraction) * _SCALES[scale.group(0).strip().lower()]
        value = float(exact)  # "1.1 million" is 1100000, not 1100000.0000000002
        if abs(value) < 1e15:
            out.append((match.start(), text[match.start() : scale.end()], int(value) if value.is_integer() else value))
    return out


def scaled_numbers(text: str) -> list[tuple[str, int | float]]:
    """The numbers a request writes with a word of scale, as written and in digits: ("100 million", 100000000),
    ("2.5万", 25000). Told them in digits, the arguments model copies them; left to convert "100 million" itself, it
    wrote ``1000000000000…`` to the token limit (BFCL multiple_127, a tuning case)."""
    return [(written, value) for _, written, value in _scaled(text.translate(_ASCII_DIGITS))]


def _all_stated(text: str) -> list[int | float]:
    found: list[tuple[int, int | float]] = []
    text = text.translate(_ASCII_DIGITS)
    scaled = {at: value for at, _, value in _scaled(text)}
    for match in _NUMBER.finditer(text):
        sign, digits, fraction = match.groups(default="")
        value = float(sign + digits.replace(",", "") + fraction)
        if match.start() in scaled:
            found.append((match.start(), scaled[match.start()]))
        elif math.isfinite(value) and len(digits.replace(",", "") + fraction.lstrip(".")) <= 15:
            found.append((match.start(), int(value) if value.is_integer() else value))
    for match in _EN_NUMBER.finditer(text):
        tens, ones, unit, big = (g.lower() if g else g for g in match.groups())
        number = _EN_TENS[tens] + (_EN_UNITS[ones] if ones else 0) if tens else _EN_UNITS.get(unit or "")
        found.append((match.start(), number or {"hundred": 100, "dozen": 12}[big or ""]))
    found += [(m.start(), _zh_value(m.group(1))) for m in _ZH_NUMBER.finditer(text)]
    found += [(at, value) for at, value, _ in _worded_durations(text) if value in (1, 0.5)]  # an hour, 半小时
    return [value for _, value in sorted(found, key=lambda pair: pair[0])]


_EN_DURATION = re.compile(
    rf"\b(?:(half an?|an|one)|({_TENS})(?:[- ]({_ONES}))?|({_UNITS}))\s+(hours?|minutes?|seconds?|days?|weeks?)\b(?!-)",
    re.IGNORECASE,
)
_FOR_A_WHILE = re.compile(
    r"\b(?:in|for|after|within|about|around|last|past|next|than|under|over|of|expires?|lasts?|takes?|wait|ttl)\s*$",
    re.IGNORECASE,
)
"""What says "an hour" is a length of time ("in an hour", "for one day", "expires half an hour"), not a rate
("$42.50 an hour", "once a day") nor a price's unit ("how much is it an hour")."""
_ZH_ONE_DURATION = re.compile(
    r"(?<![第\d一二三四五六七八九十两百千万零个同这那每前上下唯统星期])([一半])\s*(?:个)?\s*(毫秒|秒钟|秒|分钟|小时|钟头|天|周|星期)"
)
_ZH_FOR_A_WHILE = re.compile(r"^(?:后(?![端来面台续边])|内|之[后内]|以[后内]|左右|过期|失效|到期)")
"""What says 一小时 is a length of time (一小时后, 一天内, 半小时左右, 一小时过期), not a price's unit
("场地费一小时多少钱")."""


def _worded_durations(text: str) -> list[tuple[int, int | float, int | float]]:
    """The durations ``text`` states in words — where each starts, its number and its unit in seconds: "in an hour",
    "for one day", "half an hour", "twenty minutes", 一小时后, 一个星期内, 半小时左右 (0.5 h): "an", "one" and "half"
    only after what says a length of time follows (:data:`_FOR_A_WHILE`), 一 and 半 only before what says it was
    one (:data:`_ZH_FOR_A_WHILE`) — "$42.50 an hour" and "场地费一小时多少钱" state a rate. "把 feature:dark_mode 设成
    on，一小时后自动过期" offered Redis's ``set(expiration)`` had its expiry left out — 一 was no number the request
    states (:data:`_ZH_NUMBER` leaves it out: 一下, 一个) — and "expire in half an hour" had none to write (a blind
    set of other people's tools, 2026-12-07)."""
    found: list[tuple[int, int | float, int | float]] = []
    for m in _EN_DURATION.finditer(text):
        few, tens, ones, units, unit = m.groups()
        if few and not _FOR_A_WHILE.search(text[max(0, m.start() - 24) : m.start()]):
            continue
        number: int | float
        if few:
            number = 0.5 if few.lower().startswith("half") else 1
        elif tens:
            number = _EN_TENS[tens.lower()] + (_EN_UNITS[ones.lower()] if ones else 0)
        else:
            number = _EN_UNITS[units.lower()]
        found.append((m.start(), number, _DURATION_UNITS[unit.lower()]))
    for m in _ZH_ONE_DURATION.finditer(text):
        if _ZH_FOR_A_WHILE.match(text[m.end() :]):
            found.append((m.start(), 0.5 if m.group(1) == "半" else 1, _DURATION_UNITS[m.group(2)]))
    return found


def stated_numbers(text: str) -> list[int | float]:
    """The numbers a request states as numbers of their own, in order, each once: ``10`` of "for 10 seconds", ``3`` of
    "3 天", ``1500`` of "1,500", ``-4.5``, ``20`` of "20 km" and "20km"; not the digits inside a name or a code or a
    file's name (``X1``, ``v2``, ``mp3``, ``A_1``, ``2024-report.md``, ``2.md``), a date, a time, a version or a range
    (``2026-12-03``, ``3:30``, ``1.2.3``, ``10-20``, ``1/2``), nor one of over 15 digits (an id, not a number a
    float holds exactly); ``1,2,3`` is three numbers. Numbers in words are read as :data:`_ZH_NUMBER` says ("ten
    major events" → 10, "五个结果" → 5: an optional count stated in words was left to its default). An integral
    value is an ``int`` (``5``, not ``5.0``)."""
    out: list[int | float] = []
    for number in _all_stated(text):
        if number not in out:
            out.append(number)
        if len(out) == STATED_NUMBERS:
            break
    return out


def within(fn: Callable[..., dict[str, Any]], args: dict[str, Any], parameters: dict[str, Any], *rest: Any,
           **options: Any) -> dict[str, Any]:  # fmt: skip
    """``fn`` (one of the readings of a call's arguments below: ``fn(args, parameters, *rest, **options)``) applied
    to ``args``, then to each object argument whose schema declares its properties, in that schema, however deep:
    a server whose tool takes one object (``search_flights(params: {origin, adults, additional_stops, …})``, a
    Pydantic input model) has every argument nested, and ``additional_stops: []`` written there had been left
    untouched (a blind set of other people's tools, 2026-12-06). Used for :func:`without_empty` (not where the
    request :func:`empties` something) and :func:`converted_durations`; a review (2026-12-06) found a number meant
    for several nested keys ("padding 20") and a percentage on a 0–100 scale turned wrong there, so those readings
    stay at the top level."""
    out = dict(fn(args, parameters, *rest, **options))
    for key, value in out.items():
        spec = _spec(parameters, key)
        if isinstance(value, dict) and isinstance(spec.get("properties"), dict):
            out[key] = within(fn, value, spec, *rest, **options)
    return out


def empties(text: str) -> bool:
    """The request asks for something to be emptied or cleared ("Clear the description of task 123", "Remove all
    labels", 清空): an empty value the model writes is the value asked for, kept in a nested object's arguments
    (:func:`within`; a review, 2026-12-06)."""
    return _EMPTIES.search(text) is not None


def without_empty(args: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
    """``args`` without the optional ones the model gave as an empty string, list or object: no value, so the
    tool's default (``git_branch`` got ``contains: ""``, ``not_contains: ""``, a time tool ``timezone: ""``; "Find
    a Queen of Hearts in the deck" got ``deck: []``, an empty deck where the default is a full one)."""
    required = set(parameters.get("required") or ())
    return {k: v for k, v in args.items() if k in required or v not in ("", [], {})}


def _numbers_in(value: Any) -> list[int | float]:
    """The numbers a value holds: itself, its items and keys' values, the numbers its strings state."""
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers_in(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers_in(v)]
    if isinstance(value, str):
        return _all_stated(value)
    return [value] if _number(value) else []


def _date_parts(value: Any) -> list[int]:
    """The year, month and day of each date a value writes (``"04/22/2023"``: 4, 22, 2023; ``"2024-03-19T10:00"``:
    2024, 3, 19), its items' and keys' values too."""
    return [int(p) for text in _strings_in(value) for m in _DATE.finditer(text) for p in re.split(r"[-/]", m.group(0))]


_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4}")
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DAY_WRITTEN = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)\b|\b{_MONTH}\s+(\d{{1,2}})\b|\b(\d{{1,2}})\s+(?:of\s+)?{_MONTH}"
    r"|(\d{1,2})\s*[月日号]|\b((?:19|20)\d{2})\b",
    re.IGNORECASE,
)


def _dated(text: str) -> list[int]:
    """The numbers a request writes as a date's day, month or year: an ordinal ("the 15th"), beside a month's name
    ("April 22", "22 April"), before 月, 日 or 号, a year (1900–2099)."""
    return [int(next(g for g in m.groups() if g)) for m in _DAY_WRITTEN.finditer(text.translate(_ASCII_DIGITS))]


_PERCENTAGE = re.compile(r"(?<![A-Za-z0-9_.])(\d+(?:\.\d+)?)\s*(?:%|per ?cent\b)", re.IGNORECASE)
_SAYS_PERCENT = re.compile(r"percent|%|\bpct\b|百分", re.IGNORECASE)
_WHOLE_PERCENT = re.compile(r"\(integer\b|\b0\s?(?:-|–|to)\s?100\b|\b1\s?(?:-|–|to)\s?100\b", re.IGNORECASE)
"""A number argument whose description makes it a whole number (a plugin's integer: "(integer, …)") or a scale to
100 ("0-100"): a stated percentage is that number ("Dim the lights to 30%" → ``brightness: 30``; a review,
2026-12-06)."""


_PERCENT_IN_FORMULA = re.compile(
    r"(?<=[*/×÷])(\s*)(\d+(?:\.\d+)?)\s*%(?!\s*[\d(])|(?<![\d.])(\d+(?:\.\d+)?)\s*%(?=\s*[*/×÷])"
)
"""A percentage a formula multiplies or divides by: a number and ``%`` next to ``*`` or ``/`` that no operand
follows (``17% * 2340``, ``2340*17%``; not ``17 % 5``, a remainder, nor ``250 + 15%`` or a bare ``50%``, whose
sense a calculator's own rules decide)."""


def _as_fraction(number: str, percentages: set[float]) -> str:
    """``number`` percent as the decimal fraction it is (``17`` → ``0.17``) when the request states that
    percentage, else as written (``17%``)."""
    if float(number) not in percentages:
        return f"{number}%"
    return format(Decimal(number) / 100, "f")


def fractions_of_percentages(args: dict[str, Any], parameters: dict[str, Any], text: str) -> dict[str, Any]:
    """``args`` with a number the request ``text`` states as a percentage only ("a 60% chance", "5 per cent") as the
    fraction it is (``0.6``), for an argument of type ``number`` whose name and description do not say it takes a
    percentage ("in percentage", "%"). "a player has a 60% chance of making any given shot" →
    ``probability_of_success: 60`` (BFCL parallel, a tuning case read for the first time, 2026-12-06); of the tuning
    half's possible answers with an argument a stated percentage fills, 39 hold the fraction, 12 the whole number
    (each of those an argument that says percentage, or the number stated again as a count: "5% for 5 years").
    Within a formula the model wrote, a stated percentage is its fraction too: "What's 17% of 2,340?" offered
    mcp-server-calculator → ``expression: "17% * 2340"``, which its parser reads as a remainder with no left operand
    (a fault), becomes ``"0.17 * 2340"``; ``17 % 5`` stays a remainder."""
    percentages = {float(m.group(1)) for m in _PERCENTAGE.finditer(text)}
    if not percentages:
        return args
    bare = _PERCENTAGE.sub(" ", text)
    plain = {float(n) for n in stated_numbers(bare)}
    out = dict(args)
    for key, value in args.items():
        spec = _spec(parameters, key)
        if isinstance(value, str) and _FORMULA.fullmatch(value) and not spec.get("enum"):  # a formula's "17%"
            if not _SAYS_PERCENT.search(f"{key} {spec.get('description') or ''}"):
                out[key] = _PERCENT_IN_FORMULA.sub(
                    lambda m: (m.group(1) or "") + _as_fraction(m.group(2) or m.group(3), percentages), value
                )
            continue
        if not _number(value) or spec.get("type") != "number" or spec.get("enum"):
            continue
        if float(value) in percentages and float(value) not in plain and value > 1:
            described = str(spec.get("description") or "")
            if not _SAYS_PERCENT.search(f"{key} {described}") and not _WHOLE_PERCENT.search(described):
                out[key] = float(f"{value / 100:.15g}")
    return out


_HEMISPHERE_AFTER = re.compile(
    r"(?<![A-Za-z0-9_.])(\d{1,3}(?:\.\d+)?)\s*(?:°|º|˚|deg(?:rees?)?\b)?\s*(?:(N|S|E|W)\b|(north|south|east|west)\b)",
    re.IGNORECASE,
)
_HEMISPHERE_BEFORE = re.compile(
    r"(?:(?<![\d°º˚]\s)(?<![\d°º˚])\b(N|S|E|W)\s|\b(N|S|E|W)|(北纬|南纬|东经|西经)\s*)(\d{1,3}(?:\.\d+)?)"
    r"(?![\d.]|[^\W\d_])"
)
"""A hemisphere written before its number: "W74.0", "S 33.9" (not the letter after another number, "40.7 N 74.0
W": that N is the first number's), 西经118.24."""
_NEGATIVE_HEMISPHERES = frozenset(("s", "w", "south", "west", "南纬", "西经"))
_HEMISPHERE_WORDS = frozenset("n s e w north south east west".split())


def _hemispheres(text: str) -> dict[float, bool]:
    """Each number ``text`` states as a latitude or longitude with its hemisphere ("33.4484 N", "112.0740° W",
    "118 degrees west", "W74.0", "西经118.24"): True for south and west. A letter counts only in capitals (a
    "5 s" is five seconds); a number stated both ways, or also without a hemisphere, is left out."""
    marked: dict[float, set[bool]] = {}
    spans: list[tuple[int, int]] = []
    for m in _HEMISPHERE_AFTER.finditer(text):
        letter, word = m.group(2), m.group(3)
        if letter is not None and not letter.isupper():
            continue
        marked.setdefault(float(m.group(1)), set()).add((letter or word).lower() in _NEGATIVE_HEMISPHERES)
        spans.append(m.span())
    for m in _HEMISPHERE_BEFORE.finditer(text):
        side = (m.group(1) or m.group(2) or m.group(3)).lower()
        marked.setdefault(float(m.group(4)), set()).add(side in _NEGATIVE_HEMISPHERES)
        spans.append(m.span())
    bare = "".join(" " if any(a <= i < b for a, b in spans) else c for i, c in enumerate(text))
    plain = {float(n) for n in stated_numbers(bare)}
    return {n: next(iter(ways)) for n, ways in marked.items() if len(ways) == 1 and n not in plain}


def signed_coordinates(args: dict[str, Any], parameters: dict[str, Any], text: str) -> dict[str, Any]:
    """``args`` with a latitude or longitude the request ``text`` states south or west of its origin as the negative
    number it is: "(33.4484 N, 112.0740 W)" offered ``calculate_distance(coord1: "(latitude, longitude)")`` →
    ``coord1: [33.4484, 112.074]``, a point in China for one in Arizona (BFCL simple, a tuning case read for the
    first time, 2026-12-06). Only for an argument whose name says coordinates (:func:`_coordinate_key`, nested
    objects' keys too) or whose description speaks of latitude or longitude, and a number written positive that
    the request states with that hemisphere only (:func:`_hemispheres`)."""
    signs = _hemispheres(text)
    if not any(signs.values()) or any(isinstance(v, str) and v.strip().lower() in _HEMISPHERE_WORDS for v in
                                      _strings_in(args)):  # fmt: skip
        return args  # a hemisphere of its own ("lat_hemisphere": "S"): the number stays as the user wrote it

    def signed(value: Any) -> Any:
        if isinstance(value, list):
            return [signed(v) for v in value]
        if isinstance(value, dict):
            return {k: signed(v) if _coordinate_key(k) else v for k, v in value.items()}
        if _number(value) and value > 0 and signs.get(float(value)):
            return -value
        return value

    out = dict(args)
    for key, value in args.items():
        spec = _spec(parameters, key)
        about = f"{spec.get('description') or ''} {spec.get('title') or ''}".lower()
        if _coordinate_key(key.rstrip("0123456789_")) or "latitude" in about or "longitude" in about:
            out[key] = signed(value)  # coord1, coord2
        elif isinstance(value, dict):  # an object's coordinate keys
            out[key] = signed(value)
        elif isinstance(value, list):  # a list's objects' coordinate keys, not its own numbers
            out[key] = [signed(v) if isinstance(v, dict) else v for v in value]
    return out


_DURATION_UNITS = {
    "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "毫秒": 0.001,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "秒": 1, "秒钟": 1,
    "min": 60, "mins": 60, "minute": 60, "minutes": 60, "分钟": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600, "小时": 3600, "钟头": 3600,
    "day": 86400, "days": 86400, "天": 86400,
    "week": 604800, "weeks": 604800, "周": 604800, "星期": 604800,
}  # fmt: skip
"""A unit of time in seconds, as a request or an argument's name writes it."""
_STATED_DURATION = re.compile(
    r"(?<![A-Za-z0-9_.第])(\d+(?:\.\d+)?)\s*(?:个)?\s*(milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|hours?|hrs?|h|days?|weeks?|"
    r"毫秒|秒钟|秒|分钟|小时|钟头|天|周|星期)(?![A-Za-z])",
    re.IGNORECASE,
)
_ZH_DURATION = re.compile(
    r"(?<![第\d一二三四五六七八九十两百千万零])((?:[二三四五六七八九两]?十[一二三四五六七八九]?)|[一二三四五六七八九两])"
    r"\s*(?:个)?\s*(毫秒|秒钟|秒|分钟|小时|钟头|天|周|星期)"
)
"""A duration in Chinese numerals (:data:`_ZH_NUMBER`'s, and 一: ``三天``, ``两个小时``, ``一周``)."""
_ARGUMENT_UNIT = re.compile(
    r"\b(?:in|of|as|number of)\s+(milliseconds|seconds|minutes|hours|days)\b"
    r"|\((milliseconds|seconds|minutes|hours|days|ms)\)",
    re.IGNORECASE,
)


_A_POINT_IN_TIME = re.compile(r"\b(?:until|since|timestamp|epoch|unix|deadline|due|point in time)\b", re.IGNORECASE)
"""What says an argument in a unit of time is a point in time, not a length of it, in its name (and ``at``:
``expire_at``) or its description's first clause."""


def _argument_unit(key: str, spec: dict[str, Any]) -> float | None:
    """The unit of time an argument takes, in seconds: its name's last unit word (``expireSeconds``,
    ``timeout_ms``, ``duration_minutes``), else its description's ("TTL in seconds", "(ms)")."""
    words = _name_words(key)
    if "per" in words:
        return None  # hours_per_day: a rate, not a duration
    first = re.split(r"(?<=[.;])\s", str(spec.get("description") or ""), maxsplit=1)[0]  # its own clause
    if "at" in words or _A_POINT_IN_TIME.search(" ".join(words)) or _A_POINT_IN_TIME.search(first):
        return None  # unix_time_seconds, snooze_until, "ms since epoch": a point in time, not a duration
    named = [w for w in words if w in _DURATION_UNITS and w not in ("s", "h", "min")]
    if named:
        return float(_DURATION_UNITS[named[-1]])
    match = _ARGUMENT_UNIT.search(first)
    return float(_DURATION_UNITS[(match.group(1) or match.group(2)).lower()]) if match else None


_CLOCK_TIME = re.compile(r"\b\d{1,2}:\d{2}\b|\b\d{1,2}\s?(?:am|pm)\b|\d\s?点|o'?clock", re.IGNORECASE)
_CLOCK_FIELDS = frozenset("hour minute second hours minutes seconds start end at time".split())


def _durations(text: str) -> dict[float, set[float]]:
    """The numbers ``text`` states as durations, each with the units (in seconds) it is stated in: "2 hours",
    过去三天, "half an hour" (:func:`_worded_durations`)."""
    stated: dict[float, set[float]] = {}
    for m in _STATED_DURATION.finditer(text):
        stated.setdefault(float(m.group(1)), set()).add(float(_DURATION_UNITS[m.group(2).lower()]))
    for m in _ZH_DURATION.finditer(text):  # 过去三天, 两个小时
        stated.setdefault(float(_zh_value(m.group(1))), set()).add(float(_DURATION_UNITS[m.group(2)]))
    for _, number, seconds in _worded_durations(text):  # half an hour, twenty minutes, 半小时
        stated.setdefault(float(number), set()).add(float(seconds))
    return stated


_COMPOUND_DURATION = re.compile(
    r"\band a half\b|\d\s*(?:h|hrs?|hours?)\s*(?:and\s*)?\d+\s*(?:m|mins?|minutes?)\b"
    r"|(?:\bhours?|\bhrs?)\s+(?:and\s+)?\d+\s*(?:m|mins?|minutes?)\b|个?半(?:小时|钟头)|小时\s*[\d零一二三四五六七八九十两]+\s*分",
    re.IGNORECASE,
)
"""A duration said in two units ("an hour and a half", "2 hrs 30 mins", 一个半小时, 1小时30分钟): no one number of the
request is it (:func:`in_time_units` leaves the argument free)."""


def in_time_units(schema: dict[str, Any], parameters: dict[str, Any], text: str) -> dict[str, Any]:
    """The arguments ``schema`` (:func:`arguments_schema`) with a required number the tool takes in a unit of time
    (:func:`_argument_unit`: ``expire_seconds``, "timeout in ms") constrained to the durations the request ``text``
    states, in that unit: "make session:9f3 expire in 30 min" offered Redis's ``expire(name, expire_seconds)`` ran
    ``expire_seconds: 18000000000000000`` and the call was not made (a blind set of other people's tools,
    2026-12-07); ``1800`` now. An optional number is already one of the numbers stated (and then converted,
    :func:`converted_durations`). Not a clock's field where the request states a time of day, not a rate
    (``hours_per_day``), and for an integer only the durations that are whole in its unit; where none is, the
    schema is left as it was."""
    stated = _durations(text)
    if not stated or not isinstance(schema.get("properties"), dict) or _COMPOUND_DURATION.search(text):
        return schema
    clock = _CLOCK_TIME.search(text) is not None
    out = {**schema, "properties": dict(schema["properties"])}
    for key, spec in (parameters.get("properties") or {}).items():
        if key not in (parameters.get("required") or ()) or key not in out["properties"]:
            continue
        if not isinstance(spec, dict) or spec.get("enum") or spec.get("type") not in ("integer", "number"):
            continue
        if clock and set(_name_words(key)) <= _CLOCK_FIELDS:
            continue
        unit = _argument_unit(key, spec)
        if unit is None:
            continue
        whole = spec.get("type") == "integer" or "(integer" in str(spec.get("description") or "")
        choices: list[int | float] = []
        for number, units in stated.items():
            for seconds in sorted(units):
                value = float(f"{number * seconds / unit:.15g}")
                if value.is_integer():
                    choices.append(int(value))
                elif not whole:
                    choices.append(value)
        if choices:
            out["properties"][key] = {"type": spec["type"], "enum": list(dict.fromkeys(choices))}
    return out


def converted_durations(args: dict[str, Any], parameters: dict[str, Any], text: str) -> dict[str, Any]:
    """``args`` with a number of a unit of time that the request ``text`` states in another unit written in that
    unit's terms: "Store session:8841 = active in redis; it should expire after 2 hours." offered the Redis server's
    ``set(expireSeconds)`` → ``expireSeconds: 2`` (a blind set of other people's tools, 2026-12-06): ``7200``.
    Only for a number of ``args`` (a nested object's through :func:`within`) whose name or its description's first
    clause gives its unit (:func:`_argument_unit`; not a rate, ``hours_per_day``), not a clock's field where the
    request states a time of day ("at 5:45 … for 45 seconds" → ``minute: 45`` stays), and a number the request
    states with one unit only and nowhere without it; a result that is not whole stays as written for an
    integer (a review, 2026-12-06, found the rate, the clock and another clause's unit converted)."""
    stated = _durations(text)
    if not stated:
        return args
    bare = _ZH_ONE_DURATION.sub(" ", _EN_DURATION.sub(" ", _ZH_DURATION.sub(" ", _STATED_DURATION.sub(" ", text))))
    plain = {float(n) for n in stated_numbers(bare)}
    clock = _CLOCK_TIME.search(text) is not None
    out = dict(args)
    for key, value in args.items():
        spec = _spec(parameters, key)
        if not _number(value) or spec.get("enum") or float(value) in plain:
            continue
        if clock and set(_name_words(key)) <= _CLOCK_FIELDS:
            continue  # "at 5:45 … for 45 seconds": a clock's minute, not a duration
        units = stated.get(float(value))
        unit = _argument_unit(key, spec) if units and len(units) == 1 else None
        if unit is None or units is None or unit in units:
            continue
        seconds = float(value) * next(iter(units)) / unit
        whole = spec.get("type") == "integer" or "(integer" in str(spec.get("description") or "")
        if seconds.is_integer():
            out[key] = int(seconds)
        elif not whole:  # an integer (a plugin's carries "(integer" in its hints) keeps what the model wrote
            out[key] = float(f"{seconds:.15g}")
    return out


def spare_numbers(args: dict[str, Any], parameters: dict[str, Any], text: str) -> dict[str, Any]:
    """``args`` without the optional numbers that reuse a number of the request ``text`` another argument already
    has: a number stated once fills one argument (stated twice, two). The model filled every optional number it
    was offered with one of the request's (:func:`arguments_schema`): "the forecast at 52.52, 13.41" →
    ``longitude: 13.41`` and ``forecast_hours: 13.41``; "a sine wave from 0 to 2 pi" → ``end_range: 2`` and
    ``amplitude: 2``; "news about Windows 11" → ``query: "Windows 11 news"`` and ``max_results: 11``. The other
    arguments are counted first, nested values and the numbers their strings state too, and a date's day, month
    and year the request wrote as a date's (:func:`_dated`: "a train on April 22nd" → ``date_of_journey:
    "04/22/2023"`` and ``number_of_adults: 22``; "a flight on the 15th" → ``number_of_tickets: 15``; BFCL live,
    tuning cases; not "10 people" for a date's 10th); a dropped one gets its default. A value meant
    for several ("width and height 100") stays in the first only, but one that is its argument's default goes
    before any other (dropped, it is still the value): "从第5000个字符开始接着读" offered a fetch tool →
    ``max_length: 5000`` (its default) and ``start_index: 5000``, the start was dropped (MCP several,
    a tuning case)."""
    required = set(parameters.get("required") or ())
    optional = [
        k
        for k, v in args.items()
        if k not in required
        and _number(v)
        and _spec(parameters, k).get("type") in _STATED_ONLY
        and not _spec(parameters, k).get("enum")
    ]
    optional.sort(key=lambda k: _is_default(args[k], _spec(parameters, k)))  # stable: the others keep their order
    left = _all_stated(text)
    taken = [args[k] for k in args if k not in optional]
    for number in _numbers_in(taken):
        if number in left:
            left.remove(number)
    dated = _dated(text)
    for number in _date_parts(taken):  # a day the request wrote as a date's, taken by a date: not a count too
        if number in left and number in dated:
            left.remove(number)
            dated.remove(number)
    out = dict(args)
    for key in optional:
        if args[key] in left:
            left.remove(args[key])
        else:
            del out[key]
    return _without_others_numbers(out, parameters, text)


def _without_others_numbers(args: dict[str, Any], parameters: dict[str, Any], text: str) -> dict[str, Any]:
    """``args`` without an optional number (an integer too) whose value the request ``text`` gives only as the
    number of another argument the call holds with another value (:func:`_numbers_of_keys`: "a capacitance of
    100µF" is the capacitance's 100, written ``0.0001`` in farads; "a distance of 4 meters" is the distance's, which
    this call gives as 2). A review (2026-12-07, ~70 hand-written requests) found a first version, which counted
    every declared key, dropping ``page_size: 50`` for "a page of 50 results" (``page`` not in the call), ``width:
    512`` for "width and height of 512" and ``voltage: 12`` for "a capacitance at 12 V"."""
    required = set(parameters.get("required") or ())
    of_keys = _numbers_of_keys(parameters, text)
    stated = _all_stated(text)
    out = dict(args)
    for key, value in args.items():
        spec = _spec(parameters, key)
        if key in required or not _number(value) or spec.get("type") not in _NUMBERS or spec.get("enum"):
            continue
        theirs = [
            n
            for other, numbers in of_keys.items()
            if other != key and other in args and _number(args[other]) and args[other] != value
            for n in numbers
            if n == value
        ]
        if theirs and value not in of_keys.get(key, ()) and stated.count(value) <= len(theirs):
            del out[key]
    return out


def _numbers_of_keys(parameters: dict[str, Any], text: str) -> dict[str, list[float]]:
    """Each number argument's numbers that the request ``text`` gives as its own: the key's words, then a number
    (:data:`_ITS_OWN`: "a capacitance of 100µF", "distance is 4 meters"). Such a number is not another
    argument's: the model wrote ``round_off: 100`` beside ``capacitance: 0.0001`` for "capacitance of 100µF", and
    ``permitivity: 4`` from the second charge's "distance of 4 meters" (BFCL simple and parallel, tuning cases)."""
    found = _keys_said_with(parameters.get("properties") or {}, text.lower().translate(_ASCII_DIGITS), _ITS_OWN)
    return {key: [float(m.group(1).replace(",", "")) for m in matches] for key, matches in found.items()}


def _is_default(value: Any, spec: dict[str, Any]) -> bool:
    """``value`` is the default the declaration gives (``default``, or the registry's hint ``(…, default 3)``)."""
    if "default" in spec:
        return bool(spec["default"] == value)
    for hint in _hint_items(str(spec.get("description") or "")):
        if hint.startswith("default "):
            default = hint.removeprefix("default ")
            return default in (str(value), f"{value}.0") if _number(value) else value == default
    return False


def parse_arguments(text: str) -> dict[str, Any] | None:
    """The arguments object the constrained step wrote (:func:`tidy`), None when it is cut short (not one whole
    JSON object)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return tidy(value) if isinstance(value, dict) else None


_WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_\u3400-\u9fff\uf900-\ufaff]+")
_NAME_PART = re.compile(r"[^\W\d][\w'-]*")
_SENTENCE_END = (".", "!", "?", "。", "！", "？")
_DATE_OR_TIME = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}:\d{2}|\d{1,2}/\d{1,2}/\d{2,4}")
_TIME_SPOKEN_OF = re.compile(
    r"\d|\b(?:today|tomorrow|yesterday|tonight|now|morning|afternoon|evening|night|noon|midnight|day|days|week|weeks|"
    r"weekend|month|months|year|years|hour|hours|minute|minutes|ago|next|last|this|until|since|before|after|"
    r"mon|tue|wed|thu|fri|sat|sun|(?:mon|tues|wednes|thurs|fri|satur|sun)days?|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|"
    r"nov|dec|january|february|march|april|may|june|july|august|september|october|november|december|o'clock|"
    r"date|time|when|[ap]m)\b|[今明昨前后早晚午夜周月年日号点天时]|星期|礼拜",
    re.IGNORECASE,
)
"""Anything that speaks of a date or a time (a digit, a day's or a month's name, "next", "ago", 今天, 周五…):
where the conversation has none, an optional date or time the model wrote is made up (:func:`unasked`)."""
NAME_WORDS = 4
"""Most words of a value :func:`made_up` judges (a name, a place, an id)."""


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _said(word: str, said: set[str]) -> bool:
    """``word`` is one of ``said``, or begins one or is begun by one (three letters or more), a final ``e`` of the
    word said aside ("driving" for "the drive from Boston", "closing" for "close"), or is its irregular
    plural or singular (:data:`_IRREGULAR_PLURALS`: "women" for "woman tennis"; BFCL simple's ``gender: "women"``
    had been dropped as unsaid, a tuning case)."""
    if word in said:
        return True
    if len(word) < 3:
        return False
    if any(w.startswith(word) or (len(w) >= 3 and word.startswith(_e_aside(w))) for w in said):
        return True
    one = _IRREGULAR_PLURALS.get(word, word)
    return any(_IRREGULAR_PLURALS.get(w, w) == one for w in said if w[:1] == word[:1])


_IRREGULAR_PLURALS = {
    "men": "man", "women": "woman", "children": "child", "people": "person", "feet": "foot", "teeth": "tooth",
    "mice": "mouse", "geese": "goose", "wives": "wife", "knives": "knife", "lives": "life", "leaves": "leaf",
}  # fmt: skip
"""English plurals that are not their singular with an ending (:func:`_said`; a regular one begins with its
singular)."""


def _e_aside(word: str) -> str:
    return word[:-1] if len(word) >= 5 and word.endswith("e") else word


def _a_name(value: str) -> bool:
    """A short value that reads as a name or an id: every word capitalised or joined by ``_`` ("San Francisco,
    CA", "Boston Celtics", "JFK", "john_doe"), not a sentence ("Leaves fall.")."""
    parts = _NAME_PART.findall(value)
    if not parts or len(parts) > NAME_WORDS or value.rstrip().endswith(_SENTENCE_END) or _CJK.search(value):
        return False
    if _DATE_OR_TIME.search(value):
        return False  # a date or time the model may have worked out ("tomorrow at 3pm")
    return all(p[0].isupper() or "_" in p for p in parts)


_ANY_NUMBER = re.compile(
    r"\d|\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|twenty|thirty|forty|"
    r"fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|trillion|dozen|half|once|twice|double|"
    r"triple|quarter|pi|first|second|third|fourth|fifth|tenth|single|pair|couple)\b",
    re.IGNORECASE,
)
"""A number, in digits or in words, anywhere in a conversation (:func:`made_up`)."""
_ZH_ANY_NUMBER = re.compile(r"[〇零二三四五六七八九十百千万亿两半俩仨]|一(?![个下些点直起样般定切共旦同再])")
"""A number in Chinese words: a numeral, not ``一`` as an article or in a word (``一个标准大气压``, ``一下``,
``一些``, ``一直``: the Chinese request with no number of its own, :func:`made_up`)."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numbers_only(value: Any) -> bool:
    """A number, or an object or a list that holds numbers and nothing else (coordinates, a matrix)."""
    if isinstance(value, dict):
        return bool(value) and all(_numbers_only(v) for v in value.values())
    if isinstance(value, list):
        return bool(value) and all(_numbers_only(v) for v in value)
    return _number(value)


def _spec(parameters: dict[str, Any], key: str) -> dict[str, Any]:
    spec = (parameters.get("properties") or {}).get(key)
    return spec if isinstance(spec, dict) else {}


_PROPER_NOUN = re.compile(
    r"(?<![.!?]\s)(?<!^)\b(?!(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)days?\b|(?:January|February|March|April|May|June|"
    r"July|August|September|October|November|December)\b)[A-Z][a-z]+"
)
"""A capitalised word within a sentence: a name whose numbers can be looked up (a city's coordinates), not a
weekday's or a month's (a sigh about Mondays → ``calculator("100 * 0.075")`` had passed for a formula of a name's
numbers: agent-mine-v5, a tuning set, 2026-12-05)."""


def _conversation_text(messages: Sequence[MetonaMessage]) -> str:
    """Every message of the conversation and every tool result, earlier turns too, one per line."""
    return "\n".join(tool_text(m) if m.role == "tool" else m.content for m in messages)


def _numbers_given(messages: Sequence[MetonaMessage], looked_up: bool = True) -> bool:
    """The conversation (every message and tool result, earlier turns too) holds a number, in digits or in words,
    or (``looked_up``) names something whose numbers can be looked up (a capitalised word within a sentence: "the
    weather in Berlin" → its coordinates)."""
    text = _conversation_text(messages)
    if _ANY_NUMBER.search(text) or _ZH_ANY_NUMBER.search(text):
        return True
    return looked_up and any(_PROPER_NOUN.search(line.strip()) for line in text.splitlines())


_WHERE = re.compile(r"lat|lon|lng|coord|location|position|place|point|geo|origin|destination", re.IGNORECASE)


def _a_places_numbers(args: dict[str, Any], keys: Sequence[str], parameters: dict[str, Any]) -> bool:
    """Every one of ``keys`` is a place's number (its name, its description or, an object, its own keys speak of
    latitude, longitude, coordinates, a location, a point, an origin or a destination): what a named place is
    looked up as."""

    def said_of(key: str) -> str:
        own = " ".join(args[key]) if isinstance(args[key], dict) else ""
        return f"{key} {_spec(parameters, key).get('description') or ''} {own}"

    return all(_WHERE.search(said_of(k)) for k in keys)


def _said_text(messages: Sequence[MetonaMessage], results_from: int = 0) -> str:
    """What the user wrote, and the tool results from message ``results_from`` on."""
    results = [tool_text(m) for m in messages[results_from:] if m.role == "tool"]
    return "\n".join([m.content for m in messages if m.role == "user"] + results)


def said_length(messages: Sequence[MetonaMessage]) -> int:
    """The characters the user wrote and the tool results hold (:func:`argument_budget`)."""
    return len(_said_text(messages))


def _said_words(messages: Sequence[MetonaMessage]) -> set[str]:
    """The words the conversation gave: what the user wrote, and the current turn's tool results."""
    return _words(_said_text(messages, turn_start(messages)))


_FUNCTION_WORDS = frozenset(
    "the a an of and or in on at for to by with from my your our his her its their this that".split()
)
"""Words any sentence holds: no word of a name that was given ("The Matrix" for "…on the 9th of march": the movie
nobody named, BFCL's real users' no-call kind, a tuning case; :func:`_unsaid`)."""


def _unsaid(value: str, said: set[str]) -> bool:
    """``value`` has words (digits and :data:`_FUNCTION_WORDS` aside) and the conversation gave none of them
    (:func:`_said`), nor the initials of its name (:func:`_initials`)."""
    words = [w for w in _words(value) if not w.isdigit() and w not in _FUNCTION_WORDS]
    return bool(words) and not any(_said(w, said) for w in words) and _initials(value) not in said


def _short_for(choice: str, said: set[str]) -> bool:
    """An enum's ``choice`` of two to four letters is the short form of a word the conversation gave: its letters
    in that word's order, the first one first (``txt`` of "text files", ``py`` of "Python", ``md`` of
    "Markdown"; BFCL live's ``list_files(type: "txt")`` for "all the text files", a tuning case)."""
    word = choice.lower()
    if not (2 <= len(word) <= 4 and word.isascii() and word.isalpha()):
        return False

    def within(longer: str) -> bool:
        rest = iter(longer)
        return all(c in rest for c in word)

    return any(len(w) > len(word) and w[0] == word[0] and within(w) for w in said)


def _initials(value: str) -> str:
    """The initials of a name of two words or more before any comma, lower-case ("Los Angeles, CA" → ``la``, "New
    York City" → ``nyc``): a name the user wrote short ("LA" → ``from_city: "Los Angeles, CA"``, BFCL live, a
    tuning case); empty for anything else."""
    parts = _NAME_PART.findall(value.split(",")[0])
    return "".join(p[0] for p in parts).lower() if len(parts) >= 2 and all(p[0].isupper() for p in parts) else ""


def unasked(
    args: dict[str, Any], parameters: dict[str, Any], messages: Sequence[MetonaMessage], *, changes: bool = False
) -> dict[str, Any]:
    """``args`` without the optional free strings the conversation never gave a word of (their default applies):
    the request asked for nothing other than the default (:data:`OPTIONAL_RULE`, which the model does not always
    keep). "Which of my files mention Project Falcon?" got ``glob: "*.md"``, and the search missed the .txt file
    that mentions it. An optional enum's choice is judged the same way when the request is not Chinese (whose words
    never spell an English choice): "According to my notes, …" got ``mode: "vector"`` where the default, ``hybrid``,
    finds more, and "is docker running, use docker ps" got ``unit: "seconds"``; not a yes or a no (``"True"``, worked
    out from "I have laundry services"), nor the short form of a word given (:func:`_short_for`: ``txt`` of "text
    files"), nor any choice of a tool that ``changes`` things (its name says so, :func:`changes_things`; not merely
    that it needs the user's permission, as every untrusted plugin's tool does): its default may undo what was
    asked — "Add a line to todo.txt" writes ``mode: "append"``, and the default, ``overwrite``, would lose the
    file. A value of digits only, an enum's choice too, goes when nothing
    gave its number (:func:`_untold`: a request for an artist's songs from an album got ``year: "2010"`` of the
    years offered, BFCL live, a tuning case; on 417 recorded calls of the tuning half's multiple and real users'
    kinds, 2026-12-05, one mended, none broken), and so does a placeholder nobody wrote (:func:`_placeholder`; one
    more mended). A date or a time is judged by whether anything spoke of one (:data:`_TIME_SPOKEN_OF`: "the
    current temperature in Hyderabad" got ``time: "2023-04-15 12:00:00"``), not by its words (worked out:
    "tomorrow"). On the tuning half (2026-12-04, 90 calls of BFCL single, multiple and live, 47 of
    tool-generalisation-v1) no call's score changes with the free strings; with every tool's enums (the same calls
    and 90 more of BFCL) one call was mended and, once a yes or a no was let be, none broken. From 2026-12-04 to
    12-06 a tool that needed permission kept every choice — the bench's functions, as an untrusted plugin's tools
    (held out: real users' 18/30 with the rule on them, 17/30 without); judged by the name since, on 560 recorded
    calls of the tuning half (single, multiple, real users', parallel) 8 mended (``_class: "Value"``,
    ``genre: "Offbeat"`` for "a movie in Mountain View"), none broken once ``txt`` was read as "text". A free
    string of a Chinese request that speaks of a choice (:data:`_CHOOSES`: 按, 排, 只看, 放在) and that the argument's
    description offers as one (:func:`_offered`) is an enum's choice too: "按发布时间排" had its ``order: "date"``
    ("such as relevance or date") dropped, "放在最上面" its ``pos: "top"`` (a blind set of other people's tools,
    2026-12-07); so is a language's code whose language the request names as one (:func:`_names_the_language`:
    "grab the spanish transcript" → ``language: "es"``, the same set; not "Italian restaurants"). A review
    (2026-12-07) found both first versions keeping what nobody asked."""
    said = _said_words(messages)
    told = _said_text(messages)  # an id an earlier turn's lookup gave is told
    written = told.lower()
    required = set(parameters.get("required") or ())
    asked = question(messages)
    chinese = bool(_CJK.search(asked))
    choices = not changes and not chinese
    out = {}
    for key, value in args.items():
        if key not in required and _placeholder(value, written):
            continue  # networkId: ["your_network_id"]: no value, the default applies
        if key not in required and isinstance(value, str):
            if _DIGITS.fullmatch(value.strip()):
                judged = False  # a number, an enum's too: gone when nothing gave it
                if _untold(value.strip(), told, str(_spec(parameters, key).get("description") or "")):
                    continue
            elif _spec(parameters, key).get("enum"):
                judged = choices and value.strip().lower() not in _YES_NO and not _short_for(value.strip(), said)
            else:
                judged = not _DATE_OR_TIME.search(value)
                if not judged and not _TIME_SPOKEN_OF.search(told):
                    continue  # a date or a time where nothing spoke of one: "the current temperature" is now
                offers = str(_spec(parameters, key).get("description") or "")
                if judged and chinese and _CHOOSES.search(asked) and _offered(value, offers):
                    judged = False  # "按发布时间排" → order: "date" of "such as relevance or date": a choice
                if judged and _names_the_language(value, asked):
                    judged = False  # "the spanish transcript" → language: "es"
            if judged and _unsaid(value, said):
                continue
        out[key] = value
    return out


_CHOOSES = re.compile(r"按|排|只看|只要|只列|最|改成|改为|设为|设成|放在|换成|选")
"""A Chinese request that speaks of a choice (按…排, 只看, 放在最上面): not "查一下北京明天天气" for ``units``."""
_AS_A_LANGUAGE = r"(?:transcripts?|subtitles?|captions?|translation|version|audio|dub\w*|voice)"


def _names_the_language(code: str, text: str) -> bool:
    """``code`` (``es``, ``pt-BR``) is of a language the request names as one ("the spanish transcript", "into
    Spanish"; not "Italian restaurants", "the Japanese yen")."""
    name = _LANGUAGES.get(re.split(r"[-_]", code.strip().lower())[0])
    if name is None:
        return False
    return bool(re.search(rf"\b(?:in|into|to|from)\s+{name}\b|\b{name}\s+{_AS_A_LANGUAGE}\b", text, re.I))


def _offered(value: str, description: str) -> bool:
    """``value`` is a choice the argument's description offers, as a word of its own or quoted ("Sort order for
    results, such as relevance or date", 'Accepts "top", "bottom", or a positive number', "use `7d`")."""
    value = value.strip()
    if not 2 <= len(value) <= 24 or not re.fullmatch(r"\w+", value):
        return False
    return re.search(rf"(?<![\w./-]){re.escape(value)}(?![\w/-])", description, re.IGNORECASE) is not None


SAID_CHOICE_CHARS = 4
"""The shortest choice a request's word is taken for (``auto``, ``celsius``; not ``on``, ``all``, ``asc``)."""


def _enum_choices(spec: Any) -> list[str]:
    """The string choices of a schema's enums, its properties' and items' too."""
    if not isinstance(spec, dict):
        return []
    own = [c for c in spec.get("enum") or () if isinstance(c, str)]
    inner = [c for sub in (spec.get("properties") or {}).values() for c in _enum_choices(sub)]
    return own + inner + _enum_choices(spec.get("items"))


def spells_its_choice(tool: MetonaToolDef, text: str) -> bool:
    """``text`` spells one of the choices ``tool``'s arguments offer (:func:`_spells_choice`, :data:`SAID_CHOICE_CHARS`
    letters or more, not a yes or a no): a value only that tool takes. "list all pets in the petstore that have been
    sold" — the model named ``findPetsByStatus`` (status: available, pending, sold) unsure, and the embedder's nearer
    ``findPetsByTags`` was called with ``tags: ["sold"]`` (a blind set of other people's tools, 2026-12-06): a pick
    that the request names a choice of does not give way to a nearer tool whose choices it does not spell and whose
    words it does not name (:func:`nearer`, :func:`named_by`: a review found "Turn on kitchen light" keeping
    ``set_theme`` for its "light" against ``turn_on_light``). Of the 16 recorded swaps to a nearer tool on the
    tuning half none is such a pick."""
    declared = tool.parameters.model_dump(mode="json", exclude_none=True)
    asked = text.lower()
    return any(
        len(c) >= SAID_CHOICE_CHARS and c.lower() not in _YES_NO and _spells_choice(c, asked)
        for c in _enum_choices(declared)
    )


_NEGATED = re.compile(
    r"(?:\b(?:no|not|non|without|except|never|hate|avoid|instead of|rather than|don't|dont)|不要|不用|别|除了)\W*"
    r"(?:\w+\W+){0,2}$",
    re.IGNORECASE,
)
_SPOKEN_OF = re.compile(r"\b(?:the|a|an|my|your|our|their|his|her|its|this|that|of)\W*$", re.IGNORECASE)
_ONE_OF_A_KIND = re.compile(r"\b(?:a|an)\W*$", re.IGNORECASE)
_THIS = re.compile(r"\bthis\W*$", re.IGNORECASE)
_PERIOD = re.compile(r"(?:hour|day|week|month|quarter|year)s?", re.IGNORECASE)
"""A period a choice names ("the best posts this week" offered ``time``: hour, day, week…): the one asked for, of
a window to look back over (:data:`_WINDOW`)."""
_WINDOW = re.compile(r"\b(?:time|period|range|since|window|recency|timeframe|past|last)\b|recen", re.IGNORECASE)
_NO_WINDOW = re.compile(r"recurr|repeat|frequen|schedul|interval|granular|\bunit|group|every|each|resolution", re.I)
"""An enum's key and description that make its periods a window to look back over ("Time filter for top posts",
"Filter search results by recency"), not how often or in what unit ("recurrence", "interval", "unit")."""
_MODIFIES = re.compile(r"[ -]+(?!(?:of|for|to|in|on|at|from|by|with|and|or|is|are|was|were)\b)[a-z]")
"""After a choice that follows "a" or "an", the word of the thing it says the kind of ("a thriller movie", "an
Action movie"): not a preposition or a verb ("a date of…")."""


def _spells_choice(choice: str, asked: str, *, window: bool = False) -> bool:
    """``asked`` (lower-cased) spells ``choice`` as a word of its own, not negated ("not in fahrenheit", "no
    images", within three words) nor as a thing spoken of ("the date of the party", "my parents") — unless it says
    what kind of thing is asked for, after "a" or "an" (:data:`_MODIFIES`: "Find me a thriller movie…" offered a
    genre had been searched for any genre; "the fahrenheit scale, explain it" is still spoken of). Of 511 recorded
    calls of the tuning sets, three changed, each wrong to right. Of a ``window`` (an enum of periods to look back
    over: :data:`_WINDOW`), a period after "this" is the one asked for (:data:`_PERIOD`: "the best of
    r/AskHistorians this week" had got the top posts of no period, a blind set of other people's tools,
    2026-12-07); a review over 26 hand-written requests found a first version, for any enum, making "Remind me to
    call mom this week" weekly and "How many hours did I log this week?" counted in weeks."""
    for match in re.finditer(rf"(?<![a-z0-9_-]){re.escape(choice.lower())}(?![a-z0-9_-])", asked):
        before = asked[max(0, match.start() - 40) : match.start()]
        if _NEGATED.search(before):
            continue
        if not _SPOKEN_OF.search(before) or (_ONE_OF_A_KIND.search(before) and _MODIFIES.match(asked, match.end())):
            return True
        if window and _THIS.search(before) and _PERIOD.fullmatch(choice):
            return True
    return False


def said_choices(args: dict[str, Any], parameters: dict[str, Any], messages: Sequence[MetonaMessage]) -> dict[str, Any]:
    """``args`` with an optional enum the model left out set to the one choice the request spells as a word of its
    own: "…the forecast in fahrenheit for the next 5 days" offered ``temperature_unit`` (``celsius``,
    ``fahrenheit``; default ``celsius``) got no unit, and the forecast came in celsius. Only where exactly one of
    the enum's choices (:data:`SAID_CHOICE_CHARS` letters or more) is said, it is not the default, and no argument
    the model gave already holds it (the word went to another argument). Of 144 right recorded calls of the tuning
    half (2026-12-06) none changed; one call was mended."""
    asked = question(messages).lower()
    required = set(parameters.get("required") or ())
    taken = " ".join(str(v) for v in _strings_in(args)).lower()
    out = dict(args)
    for key, spec in (parameters.get("properties") or {}).items():
        if key in required or key in args or not isinstance(spec, dict):
            continue
        about = _said_of(key, spec)
        window = bool(_WINDOW.search(about)) and not _NO_WINDOW.search(about)
        said = [
            c
            for c in spec.get("enum") or ()
            if isinstance(c, str) and len(c) >= SAID_CHOICE_CHARS and _spells_choice(c, asked, window=window)
        ]
        if len(said) == 1 and said[0].lower() not in taken and not _is_default(said[0], spec):
            out[key] = said[0]
    return out


_DIGITS = re.compile(r"\d+")


def _untold(digits: str, told: str, description: str) -> bool:
    """A value of ``digits`` that neither the conversation's text ``told`` (in digits, or a number in words:
    :func:`_all_stated`) nor the argument's own ``description`` (``1 for Bangkok, 2 for Chiang Mai``) gives."""
    written = re.compile(rf"(?<!\d){digits}(?!\d)")
    return not written.search(told) and not written.search(description) and int(digits) not in _all_stated(told)


_YES_NO = frozenset({"true", "false", "yes", "no", "on", "off"})
"""Enum choices that answer a yes-or-no question: worked out from what the request means, never words it says."""


_FORMULA = re.compile(r"[\d\s.,+\-*/×÷^%()=]*\d[\d\s.,+\-*/×÷^%()=]*")
"""A value of digits and arithmetic only (``366``, ``100 * 0.075``, ``(3 + 4) / 2``): the numbers of a formula, an
id or a count, each of which the conversation must give (or name something to look up by) for the model to write
it (:func:`made_up`)."""


_ASKS_A_FORMULA = re.compile(r"\b(?:expression|formula|equation)s?\b", re.I)
_MATHS = re.compile(r"math|arithmetic|calculat|comput|evaluat|numer|solv|\d\s*[-+*/^×÷]\s*\d", re.I)
_ARITHMETIC = re.compile(r"[\d+\-*/×÷^%()=<>]")


def asks_a_formula(key: str, spec: dict[str, Any]) -> bool:
    """The argument asks for a formula of numbers: its name or its description says expression, formula or
    equation, and its description speaks of maths or shows a formula (the calculator's ``expression``, e.g.
    ``(3 + 4) * 2``), not a search or a filter "expression"."""
    if spec.get("enum") or spec.get("type") not in (None, "string"):
        return False
    described = str(spec.get("description") or "")
    asks = _ASKS_A_FORMULA.search(" ".join(_name_words(key))) or _ASKS_A_FORMULA.search(described)
    return bool(asks) and bool(_MATHS.search(described))


_NUMBER_TERM = r"\(* ?-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)? ?\)*"
FORMULA_OF_NUMBERS = rf"^ ?{_NUMBER_TERM}(?: ?(?:\*\*|[-+*/%]) ?{_NUMBER_TERM})* ?$"
"""Numbers (no leading zero: a date's ``2024-01`` is no number), operators and brackets."""


_WITH_ITS_VALUE = re.compile(r"^([^=]*[\d)][^=]*?)\s*(?<![<>=!])=(?!=)\s*-?[\d.,]+\s*$")
_FUNCTIONS = re.compile(r"[A-Za-z_]\w*(?=\s*\()|\b(?:pi|e|tau)\b")


def without_its_value(args: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any]:
    """``args`` with a formula of numbers (:func:`asks_a_formula`, not an equation's) that ends in ``= <number>``,
    the model's own result, cut before the ``=``: "487 / 3 = 162.33" (agent-bilingual-v1, a tuning set,
    2026-12-05) is no expression a calculator evaluates, and its result is the tool's to give."""
    out = dict(args)
    for key, value in args.items():
        spec = _spec(declared, key)
        if not isinstance(value, str) or "equation" in key.lower() or not asks_a_formula(key, spec):
            continue
        match = _WITH_ITS_VALUE.match(value)
        if match and not re.search(r"[A-Za-z]", _FUNCTIONS.sub("", match.group(1))):  # no unknown: "2*x = 8" stays
            out[key] = match.group(1).strip()
    return out


def numbers_only(schema: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with each formula argument (:func:`asks_a_formula`) written in digits and operators only
    (:data:`FORMULA_OF_NUMBERS`): a formula of numbers that tool results hold. Free, the 1.5B model named the data
    instead of writing its numbers (``sum(hours)``, ``sum(invoices.txt)``: 1 of 3 formulas right on the
    two-step requests written for :data:`NEXT_PART_COSINE`; 3 of 3 so)."""
    properties = dict(schema.get("properties") or {})
    for key, spec in (declared.get("properties") or {}).items():
        if key in properties and isinstance(spec, dict) and asks_a_formula(key, spec):
            properties[key] = {**properties[key], "pattern": FORMULA_OF_NUMBERS}
    return {**schema, "properties": properties}


_DECIMAL = re.compile(r"\d+(?:\.\d+)?")
_DATA_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])|\d+(?:\.\d+)?")
"""A number in data: ``1,250`` whole, and a table's ``300.10,280.50`` as two."""


def from_the_data(
    args: dict[str, Any], declared: dict[str, Any], data: str, given: Collection[int | float] = ()
) -> bool:
    """Each formula argument (:func:`asks_a_formula`) takes at least two thirds of its numbers from ``data`` (a
    part of the request and the results it is computed from, :func:`with_results`), two of them values that tell
    where they came from (not a single digit: the results' own numbering, ``[1]`` … ``[5]``, and counts hold
    those): a count or a constant it adds is its own (the ``4`` of an average of four), a formula of numbers the
    data never holds is made up (after a notes search found a router's address, ``5 * 3 + 2 / 4``; agent-mine-v3,
    a tuning set, 2026-12-05). The numbers ``given`` (what the part states that no call has used,
    :func:`unused_numbers`: the ``3`` of "再按 3 个人平摊") tell where they came from whatever their size."""
    known = {float(n.replace(",", "")) for n in _DATA_NUMBER.findall(data)}
    stated = {float(n) for n in given}
    for key, spec in (declared.get("properties") or {}).items():
        value = args.get(key)
        if isinstance(spec, dict) and isinstance(value, str) and asks_a_formula(key, spec):
            numbers = [float(n) for n in _DECIMAL.findall(value)]
            traced = [n for n in numbers if n in known and (n in stated or not (n.is_integer() and n < 10))]
            if 3 * sum(n in known for n in numbers) < 2 * len(numbers) or len(traced) < 2:
                return False
    return True


PLAN = "plan"
PLAN_RULE = (
    f'Write "{PLAN}" first: the quantity asked for and its unit, from which numbers, by which operation (one line). '
    "Then the arguments."
)
PLAN_TOKENS = 80
"""A call whose arguments hold a formula of numbers (:func:`asks_a_formula`) is written after a one-line plan
(:func:`with_plan`: the key :data:`PLAN` first in the grammar, the rule :data:`PLAN_RULE`; taken out before the
call, its budget :data:`PLAN_TOKENS` more). Without one the 1.5B model wrote the formula straight from the request
and got the quantity wrong: ``(5 / 89.9) * 100`` for the price per litre of 5 litres at 89.9, ``26.2 * 1.609344 /
100`` for 26.2 miles in km, ``540 / 45 / 100`` for litres per 100 km. On 20 arithmetic requests written for this
(2026-12-05, 6 from agent-mine-v3's runs, a tuning set), f32: 13 right without the plan, 15 with it (a plan that
asked only "which quantity, how": 14); ``sum``/``mean`` taken by the calculator since, one more."""


def nothing_to_compute(tool: MetonaToolDef, messages: Sequence[MetonaMessage]) -> bool:
    """A tool that computes (:func:`computes`) picked for a request that states no number of its own
    (:func:`_own_numbers`; "two", "五个" count, "one", 一 and a date's do not) in a conversation whose earlier turns
    state none either ("add them up" after a list of prices is arithmetic): its formula could only hold numbers the
    model made up. "How many teaspoons in a tablespoon?", "一斤等于多少克？" and "翻下我笔记，羽毛球场地费一小时多少
    钱？" went to the calculator at p 0.6–0.9 with a made-up formula or a bare number (agent-mine-v6 and v7, tuning
    sets, 2026-12-06): the first two are answered, the last is the notes search's (:func:`spoken_of_as_theirs`)."""
    if not computes(tool) or _own_numbers(question(messages)):
        return False
    earlier = messages[: max(turn_start(messages) - 1, 0)]
    return not any(_own_numbers(tool_text(m) if m.role == "tool" else m.content) for m in earlier)


def computes(tool: MetonaToolDef) -> bool:
    """The tool takes a formula of numbers (:func:`asks_a_formula`): the calculator, a plugin's ``evaluate``."""
    declared = tool.parameters.model_dump(mode="json", exclude_none=True).get("properties") or {}
    return any(asks_a_formula(k, v) for k, v in declared.items() if isinstance(v, dict))


def with_plan(tool: MetonaToolDef, schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` (an :func:`arguments_schema`) with :data:`PLAN`, a string, as its first and required property,
    when the tool asks a formula of numbers (:func:`asks_a_formula`) and declares no argument of that name; else
    None."""
    declared = tool.parameters.model_dump(mode="json", exclude_none=True).get("properties") or {}
    if PLAN in declared or not any(asks_a_formula(k, v) for k, v in declared.items() if isinstance(v, dict)):
        return None
    properties = {PLAN: {"type": "string"}, **(schema.get("properties") or {})}
    return {**schema, "properties": properties, "required": [PLAN, *(schema.get("required") or [])]}


def _prose_for_a_formula(key: str, value: Any, spec: dict[str, Any]) -> bool:
    """A string with neither a digit nor an operator where the argument asks for a formula of numbers (its name or
    its description says expression, formula or equation, and its description speaks of maths or shows a formula):
    the model wrote the answer into the formula ("What's the capital of Australia?" offered a calculator →
    ``expression: "Australia's capital is Canberra."``, a syntax error that the answer then ignored; agent-mine-v3,
    a tuning set), or a formula of no number at all (a constant's name aside: ``pi``, ``e``): "Add a line to
    journal.md: today's date, then …" → ``expression: "date()"`` (a request written for this, 2026-12-06). A search
    or filter "expression" (``refund``) is not judged."""
    if not isinstance(value, str) or not asks_a_formula(key, spec):
        return False
    return not _ARITHMETIC.search(value) or not re.search(r"\d|\bpi\b|π|\be\b", value, re.IGNORECASE)


_AN_OPERATION = re.compile(r"[+*/×÷^%()<>=!]|\d\s*-")


def _a_constant(key: str, value: Any, spec: dict[str, Any]) -> bool:
    """One value with no operation in it where the argument asks for a formula (:func:`asks_a_formula`): nothing is
    computed, the model wrote its answer into the formula ("How many moons does Mars have?" offered a calculator →
    ``expression: "4"``, "水的化学式是什么？" → ``"H2O"``; questions written for this, 2026-12-05: the call "returned"
    the made-up answer as if computed, or failed)."""
    return isinstance(value, str) and not _AN_OPERATION.search(value) and asks_a_formula(key, spec)


_ADDRESS = re.compile(r"\bhttps?://([^/\s?#:\"'<>]+)", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}")
"""An e-mail address; bounded (a local part is at most 64 characters) so a long run of letters in a file's content is
read in linear time."""


def _unknown_address(value: Any, known: str) -> bool:
    """``value`` (nested values too) holds a web address whose host ``known`` — the conversation, its results, the
    tool's description and parameters, lower-cased — never writes: an address the model made up. Where no offered
    function fitted, the 0.5B model sent an HTTP GET tool to ``https://api.open-meteo.com/v2/…`` with made-up
    coordinates, ``https://api.example.com/intent`` and the like: 6 of the tuning half's recorded no-call failures
    held an address, none of them written anywhere; the 6 other recorded calls with an address (4 of them right)
    held one whose host the request wrote (BFCL's real users' and no-call kinds, MCP fetch, 2026-12-05). So is an
    e-mail address nobody wrote, whole ("I have a transaction, can you do it?" → ``receiver:
    "example@example.com"``, "… to my landlord's email" → ``landlord@landlord.com``; of the tuning half's recorded
    calls, the one right call with an address held the request's own)."""
    texts = _strings_in(value)
    hosts = [host.lower().removeprefix("www.") for text in texts for host in _ADDRESS.findall(text)]
    mails = [m.lower() for t in texts if "@" in t for m in _EMAIL.findall(t)]
    return any(h not in known for h in hosts) or any(m not in known for m in mails)


_SECRET = re.compile(r"pass(?:word|wd|phrase|code)?$|token$|secret|api_?key$|credential|^pin$", re.IGNORECASE)


def _untold_secret(key: str, value: Any, written: str) -> bool:
    """A password, token, key or secret (its argument's name says so) that the conversation and its results,
    lower-cased in ``written``, never wrote: never guessed. Where no offered function fitted, the 0.5B model
    added a Postgres server with ``password: "plgah_password"`` (BFCL live_irrelevance_239-43-1, a tuning case);
    the recorded right calls with a password or key held one the request wrote (``123412``, ``gorilla-123``)."""
    return isinstance(value, str) and bool(value.strip()) and bool(_SECRET.search(key)) and value.lower() not in written


_PLACEHOLDER = re.compile(
    r"\byour[_ -]?\w*|\b\w*_here\b|\bpath[_/]to[_/]|<[^<>\s]{2,}>|\bplaceholder\b|\bx{3,}\b|\binsert[_ ]"
    r"|\b(?:user|product|item|file|order|customer|account|client|employee|doc|document|record|ticket|task|project|"
    r"prod|sku)[_-]?\d{1,3}\b|^(?:1234|12345|123456|123456789|abc123|test123)$|^[你您]的[^\s，。、,.]{1,12}$",
    re.IGNORECASE,
)


def _placeholder(value: Any, said: str) -> bool:
    """``value`` (or a string it holds) is a placeholder the conversation (``said``, lower-case) never wrote: the model
    had no value and wrote where one goes (``your_token_here``, ``YOUR_API_KEY``, ``path_to_image.jpg``, ``<user_id>``,
    ``你的起点地址``), or a numbered example of a kind (``user123``, ``product1``, ``file1.txt``) or a run of digits
    (``12345``) for an id ("Adds an ACL mapping" → ``principal_id: "user123", resource_id: "file1.txt"``, "Give me
    details about a pair of running shoes" → ``product_id: "12345"``: BFCL's real users' no-call kind, tuning half,
    2026-12-06). Tuning: BFCL's real users' and general no-call cases (``search_messages(token: "your_token_here")``);
    none of the 1018 tuning truths holds one the request did not write, nor (the numbered examples and runs of digits)
    any of the 1797 tuning cases' truths. Only a short value (:data:`PLACEHOLDER_WORDS`, one line) is judged, and one
    the user wrote in another spelling is theirs ("order #17" → ``order-17``)."""
    squeezed = re.sub(r"[\W_]+", "", said)
    short = [text for text in _strings_in(value) if "\n" not in text and len(text.split()) <= PLACEHOLDER_WORDS]
    return any(
        m.group(0).lower() not in said and re.sub(r"[\W_]+", "", m.group(0).lower()) not in squeezed
        for text in short
        for m in _PLACEHOLDER.finditer(text)
    )


PLACEHOLDER_WORDS = 3
"""The most words a value :func:`_placeholder` judges: an id, a key, a path, a tag (``<slack token>``), not text the
model composes ("Thanks for your help today!", a file of sample rows ``1,user1``)."""


_NUMBERED_THINGS = frozenset("pull pr issue order invoice mr build".split())
"""Things a ``<word>_number`` names by an id of the user's (``pullNumber``, ``issue_number``, ``order_no``): not a
count (``guest_number``, ``ticket_number``: how many), a phone's or a card's digits (written with separators),
an episode's or a floor's ordinal (a review, 2026-12-06; :func:`_untold_id`)."""


def _untold_id(key: str, value: Any, known: str) -> bool:
    """``value``, for an argument named an id (``user_id``, ``playerID``, ``order_ids``, ``identifier``; a thing's
    number too: ``pullNumber``, ``issue_number``, ``order_no`` — :data:`_NUMBERED_THINGS`), is a number
    (or digits) that neither the conversation nor the tool's description and schema (``known``: "1 for Bangkok")
    write: an id is looked up or given, never worked out ("Can you update my email to john.doe@example.com…" →
    ``update_user_profile(user_id: 123, …)``, BFCL's real users' no-call kind, tuning half, 2026-12-06; of the
    tuning cases' 94 possible answers with a number for an id, each is written by its request or its tool, but one
    of a kind not measured here: several calls, ``playerID: 123``). "prs open on acme/api?" offered GitHub's tools
    went to ``merge_pull_request(pullNumber: 123)`` (a blind set of other people's tools, 2026-12-06); of the tuning
    cases' 34 possible answers with a required thing's number, each is written by its request."""
    words = _name_words(key)
    numbered = len(words) > 1 and words[-1] in ("number", "num", "no", "nr") and words[-2] in _NUMBERED_THINGS
    if not words or (words[-1] not in ("id", "ids", "identifier") and not numbered):
        return False
    digits = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, int) and not isinstance(item, bool):
            digits.append(str(abs(item)))
        elif isinstance(item, str) and re.fullmatch(r"-?[0-9]+", item.strip()):
            digits.append(item.strip().lstrip("-"))
    if not digits:
        return False
    text = known.translate(_ASCII_DIGITS)
    grouped = re.sub(r"(?<=\d)[,\s](?=\d{3}\b)", "", text)  # "1,234,567", "12 345"
    written = {d.lstrip("0") for d in _DIGITS.findall(f"{text}\n{grouped}")}
    written |= {str(abs(int(n))) for n in _all_stated(text) if math.isfinite(n) and float(n).is_integer()}  # words
    ranges = [range(int(a), int(b) + 1) for a, b in _ID_RANGE.findall(text) if int(b) - int(a) <= 1000]
    return any(d.lstrip("0") and d.lstrip("0") not in written and not any(int(d) in r for r in ranges) for d in digits)


_ID_RANGE = re.compile(r"\b(\d{1,9})\s*(?:-|–|~|to|through|thru|until|到|至)\s*(\d{1,9})\b")
"""Two numbers of a range ("tasks 1-5", "1 through 3", "3到5"): the ids between are given (:func:`_untold_id`)."""


def _hollow(value: Any, said: set[str]) -> bool:
    """``value`` is an object of keys that hold nothing (an empty string, list or object, or such objects, all the
    way down), none of whose keys is a word the conversation (``said``) holds: a shape the model had no values for
    ("Compute the headway of this image" → ``ego_info: {"position": {}}``, BFCL's real users' no-call kind, tuning
    half, 2026-12-06). A bare ``{}`` is not judged (no filters, no options), nor ``null`` (a field cleared, a filter
    for what is unset: ``{"assignee": null}``), nor a key the user spoke of ("clear the description" →
    ``{"description": ""}``, "show me all documents" → ``{"match_all": {}}``); one value anywhere is the user's."""
    keys: list[str] = []

    def empty(v: Any) -> bool:
        if isinstance(v, dict):
            keys.extend(v)
            return all(empty(x) for x in v.values())
        if isinstance(v, list):
            return all(empty(x) for x in v)
        return v == ""

    if not (isinstance(value, dict) and value and empty(value)):
        return False
    return not any(_said(word, said) for key in keys for word in _name_words(key))


_WHAT_IS_ORDERED = frozenset("items products goods dishes skus".split())


_EMPTIES = re.compile(r"\b(?:empty|clear|remove|delete|blank|new|reset)\b|清空|空|删除|移除|新建", re.IGNORECASE)


def _none_listed(key: str, value: Any, said: set[str]) -> bool:
    """A required list of what the call orders (its name ends in items, products, goods, dishes, SKUs) written
    empty, whose name the conversation (``said``) does not speak of: nothing to order — "convert 'sungai long burger
    king' to coordinates" offered a food order → ``restaurant_id: "sungai_long_burger_king", items: []`` (BFCL's
    real users' no-call kind, tuning half, 2026-12-06). Not a list that qualifies a call (tags, labels, attendees,
    a command's arguments, filters: empty is their usual value), nor one the user spoke of. Of the tuning half's
    possible answers one holds a required empty list (a game of life's empty board, a kind not measured)."""
    words = _name_words(key)
    if value != [] or not words or words[-1] not in _WHAT_IS_ORDERED:
        return False
    return not any(_said(word, said) for word in words)


_FROM_END = frozenset("origin from source src departure depart start".split())
_TO_END = frozenset("destination dest to target arrival arrive end".split())


_PLACE_KINDS = frozenset(
    "airport airports station stations currency currencies language lang locale timezone tz zone".split()
)
_VIA = frozenset("via waypoint waypoints stop stops stopover stopovers layover layovers".split())


def both_ends(args: dict[str, Any]) -> list[str]:
    """The arguments of a journey's two ends, or a conversion's, that hold the same airport, station, currency,
    language or time zone: "I want to search for a round trip flight … a trip to Los Angeles" → ``origin_airport:
    "LAX", destination_airport: "LAX"`` (BFCL's real users' no-call kind, tuning half, 2026-12-06) — the start nobody
    gave. Two keys pair when one says where from (origin, from, source, departure, start) and the other where to
    (destination, to, target, arrival, end) and their other words are the same and name such a kind
    (``origin_airport`` and ``destination_airport``, ``source_timezone`` and ``target_timezone``). Not bare
    from/to/start/end (an e-mail to oneself, "from tomorrow to Friday"), not a city, a country, a location or an
    address (a same-city courier, a domestic parcel, a run that ends where it starts: two reviews, 2026-12-06), nor a
    route with stops; not dates, times or numbers. None of the tuning half's possible answers holds one."""
    if any(set(_name_words(key)) & _VIA for key in args):
        return []
    ends: dict[tuple[str, frozenset[str]], str] = {}
    for key, value in args.items():
        words = _name_words(key)
        if not isinstance(value, str) or not re.search(r"[^\W\d_]", value) or _DATE_OR_TIME.search(value):
            continue  # a place has letters
        side = "from" if set(words) & _FROM_END else "to" if set(words) & _TO_END else ""
        rest = frozenset(w for w in words if w not in _FROM_END | _TO_END)
        named = bool(rest & _PLACE_KINDS)
        if side and named and sum(w in _FROM_END | _TO_END for w in words) == 1:
            ends[(side, rest)] = key
    out = []
    for (side, rest), key in ends.items():
        other = ends.get(("to", rest)) if side == "from" else None
        if other and " ".join(str(args[key]).lower().split()) == " ".join(str(args[other]).lower().split()):
            out += [key, other]
    return out


_CODE = re.compile(r"[A-Z]{2,4}")
_CODED = re.compile(r"currenc|\bcodes?\b|_code\b|country|language|airport|\biata\b|\biso\b|ticker|symbol", re.I)


_CURRENCIES = {
    **dict.fromkeys(("dollar", "dollars", "us dollar", "us dollars", "american dollars", "美元", "美金"), "USD"),
    **dict.fromkeys(("euro", "euros", "欧元"), "EUR"),
    **dict.fromkeys(
        ("pound", "pounds", "british pound", "british pounds", "pound sterling", "sterling", "英镑"), "GBP"
    ),
    **dict.fromkeys(("yen", "japanese yen", "日元"), "JPY"),
    **dict.fromkeys(("yuan", "renminbi", "chinese yuan", "rmb", "人民币", "元"), "CNY"),
    **dict.fromkeys(("canadian dollar", "canadian dollars", "加元", "加币"), "CAD"),
    **dict.fromkeys(("australian dollar", "australian dollars", "澳元"), "AUD"),
    **dict.fromkeys(("hong kong dollar", "hong kong dollars", "港币", "港元"), "HKD"),
    **dict.fromkeys(("swiss franc", "swiss francs", "瑞士法郎"), "CHF"),
    **dict.fromkeys(("rupee", "rupees", "indian rupee", "indian rupees", "卢比"), "INR"),
    **dict.fromkeys(("won", "korean won", "韩元"), "KRW"),
    **dict.fromkeys(("singapore dollar", "singapore dollars", "新加坡元", "新币"), "SGD"),
    **dict.fromkeys(("new taiwan dollar", "new taiwan dollars", "taiwan dollar", "新台币", "台币"), "TWD"),
    **{"€": "EUR", "£": "GBP", "us$": "USD"},
}
"""Currencies by the names people call them, and their ISO 4217 codes (:func:`currency_codes`)."""


_CURRENCY_NAME = re.compile(rf"(?<![a-z])(?:{'|'.join(map(re.escape, _CURRENCIES))})(?![a-z])")
"""Any of :data:`_CURRENCIES`' names as a word of a lower-case text (:func:`_stands_for_nothing`)."""


_ISO_CURRENCIES = frozenset(
    "USD EUR GBP JPY CNY CAD AUD HKD CHF INR KRW SGD NZD SEK NOK DKK MXN BRL RUB ZAR TRY PLN THB IDR MYR PHP VND TWD "
    "AED SAR ILS CZK HUF RON EGP NGN KES PKR BDT ARS CLP COP PEN UAH".split()
)
"""Common ISO 4217 codes: a three-letter value :func:`currency_codes` upper-cases (not "all", "sym")."""


def currency_codes(args: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
    """``args`` with a currency written as its ISO 4217 code, for an argument whose name says currency
    (``from_currency``, ``base_currency``) or whose description asks for a currency code, not an enum, not asking
    for a name or lower case: "Convert 200 euros to US dollars" → ``from_currency: "euros", to_currency: "usd"``
    (BFCL multiple, tuning half, 2026-12-06) becomes ``EUR``, ``USD`` — what an exchange-rate service takes, and what
    the model wrote for every other currency of the tuning half's recorded calls. A name not in
    :data:`_CURRENCIES` stays as written; three letters are upper-cased when they are a code
    (:data:`_ISO_CURRENCIES`)."""
    out = dict(args)
    for key, value in args.items():
        spec = _spec(parameters, key)
        description = str(spec.get("description") or "")
        asks = re.search(r"currenc", key, re.I) or re.search(r"currency code|iso 4217|货币代码", description, re.I)
        if not isinstance(value, str) or spec.get("enum") or not asks or re.search(r"name|symbol", key, re.I):
            continue
        lower = re.search(r"['\"][a-z]{3}['\"]", description)  # "e.g. 'usd'"
        if lower or re.search(r"\bnames?\b|名称|symbol|符号|lower[\s-]?case|小写", description, re.I):
            continue  # "the currency's name", "in lowercase", "e.g. 'usd'": as the model wrote it
        word = value.strip().lower()
        if word in _CURRENCIES:
            out[key] = _CURRENCIES[word]
        elif word.upper() in _ISO_CURRENCIES:
            out[key] = word.upper()
    return out


_LANGUAGES = {
    "en": "English", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian", "pt": "Portuguese",
    "ru": "Russian", "ja": "Japanese", "jp": "Japanese", "zh": "Chinese", "ko": "Korean", "ar": "Arabic",
    "hi": "Hindi", "nl": "Dutch", "sv": "Swedish", "da": "Danish", "no": "Norwegian", "fi": "Finnish",
    "pl": "Polish", "tr": "Turkish", "el": "Greek", "he": "Hebrew", "vi": "Vietnamese", "th": "Thai",
    "id": "Indonesian", "uk": "Ukrainian", "cs": "Czech", "hu": "Hungarian", "ro": "Romanian",
}  # fmt: skip
"""Languages by their ISO 639-1 codes (and ``jp``, the one people write for Japanese): :func:`language_names`."""
_ASKS_A_CODE = re.compile(
    r"\bcodes?\b|\biso\b|639|bcp|locale|\btag\b|abbreviat|\b(?:two|2)[\s-]letter"
    rf"|\b(?:{'|'.join(_LANGUAGES)})(?:[-_][a-zA-Z]{{2}})?\b['\"]?\s*(?:,\s*['\"]?(?:{'|'.join(_LANGUAGES)})\b|for\b)"
    r"|\b(?:e\.g\.|eg|like|such as|ex\.|example)[:,]?\s*['\"]?[a-zA-Z]{2}\b|代码|代号|缩写",
    re.I,
)
"""What a language argument's description says when it takes a code: "code", "ISO 639", "abbreviation", "two-letter",
a list of codes ("(fr, de, es)", "'en' for English"), an example of one ("e.g. en", "like ja")."""


def _takes_a_language_name(key: str, spec: dict[str, Any]) -> bool:
    """An argument for a language (its name's words or its description's say so: ``source_language``, ``tgt_lang``,
    "The language the text is in"; not ``slang_term``) that takes no code: no enum, pattern, length bound or example,
    no code-like name (``language_code``, ``locale``) or default, and a description that asks for none
    (:data:`_ASKS_A_CODE`)."""
    words = _name_words(key)
    description = str(spec.get("description") or "")
    if not ({"lang", "language"} & set(words) or re.search(r"\blanguage\b", description, re.I)):
        return False
    if {"code", "codes", "locale", "iso", "tag", "abbr"} & set(words) or _ASKS_A_CODE.search(description):
        return False
    default = spec.get("default")
    coded = isinstance(default, str) and len(default) <= 5 and default.lower()[:2] in _LANGUAGES
    return not (coded or any(k in spec for k in ("enum", "pattern", "maxLength", "examples", "format")))


_AN_ID = re.compile(r"(?<![\w:/.#@-])[A-Za-z0-9]+(?:[:/_.#@-][A-Za-z0-9]+)+(?![\w:/#@-])")
"""A token of parts joined by ``: / _ . # @ -`` (``lb:season3``, ``feature:dark_mode``, ``user-42``)."""


def _id_parts(token: str) -> list[str]:
    return sorted(part.lower() for part in re.split(r"[^A-Za-z0-9]+", token) if part)


_TRANSLATION_ASKED = re.compile(
    r"\btranslat\w*|\bhow (?:do|would|can) (?:you|i|we) say\b|\bwhat(?:'s| is) .{1,60} in [A-Z][a-z]+\b"
    r"|翻译|翻成|译成|译为|怎么说|用\w{1,4}语怎么",
    re.IGNORECASE,
)
_TARGET_LANGUAGE = re.compile(r"target.?lang|to.?lang|dest\w*.?lang|target language|language to translate", re.I)


def quoted_as_given(
    args: dict[str, Any], parameters: dict[str, Any], messages: Sequence[MetonaMessage]
) -> dict[str, Any]:
    """``args`` of a translation tool (an argument for the target language, :data:`_TARGET_LANGUAGE`) asked for a
    translation (:data:`_TRANSLATION_ASKED`) with the one text the request quotes as the value of the one free
    string the model wrote instead of it — a text (two words or more) none of whose words the conversation gave
    (:func:`_unsaid`), where no argument holds the quote: "how do you say 'Where is the nearest pharmacy?' in
    German" offered DeepL's ``translate-text`` → ``text: "Wo ist die nächeste Pharmaz?"``, the model's own
    translation where the text to translate was asked for (a blind set of other people's tools, 2026-12-07;
    offline over 812 recorded tuning calls, the one changed). A review (2026-12-07, 27 hand-written requests) found
    a first version, for any tool, putting the quote in place of a message to send in Spanish ("Text Maria in
    Spanish: "I'll be there at 8""), a reworded reply and a poem saved to a quoted file name; and a quote an
    apostrophe ends ("'I don't know'") is none."""
    asked = question(messages)
    declared = (parameters.get("properties") or {}).items()
    if not _TRANSLATION_ASKED.search(asked) or not any(
        isinstance(spec, dict) and _TARGET_LANGUAGE.search(f"{key} {spec.get('description') or ''}")
        for key, spec in declared
    ):
        return args
    found = list(_QUOTED_TEXT.finditer(asked))
    if len(found) != 1 or asked[found[0].end() : found[0].end() + 1].isalpha():
        return args
    quote = found[0].group()[1:-1].strip()
    if not quote or any(quote.lower() in str(v).lower() for v in _strings_in(args)):
        return args
    said = _said_words(messages)
    written = [
        key
        for key, value in args.items()
        if isinstance(value, str)
        and len(_WORD.findall(value)) >= 2
        and not _spec(parameters, key).get("enum")
        and _unsaid(value, said)
    ]
    if len(written) != 1 or _spec(parameters, written[0]).get("type") not in ("string", None):
        return args
    return {**args, written[0]: quote}


def verbatim_ids(args: dict[str, Any], text: str) -> dict[str, Any]:
    """``args`` with an id the request ``text`` spells (:data:`_AN_ID`, a letter among its parts) written as the
    request spells it, where the model wrote the same parts in another order or joined otherwise: "add player kira
    w/ 4200 pts to the lb:season3 leaderboard" offered Redis's ``zadd`` → ``key: "season3_lb"`` (a blind set of
    other people's tools, 2026-12-07), a key nobody has. A value the request holds as written, one of other parts,
    one that two of the request's ids could be, and ids of digits only (a date written in another order on purpose)
    stay as the model wrote them. The top level's strings and lists of strings."""
    spelled: dict[tuple[str, ...], set[str]] = {}
    for token in _AN_ID.findall(text):
        if re.search(r"[A-Za-z]", token):
            spelled.setdefault(tuple(_id_parts(token)), set()).add(token)

    def fixed(value: Any) -> Any:
        if not isinstance(value, str) or value in text or not _AN_ID.fullmatch(value):
            return value
        found = spelled.get(tuple(_id_parts(value))) or set()
        return next(iter(found)) if len(found) == 1 else value

    if not spelled:
        return args
    return {k: [fixed(v) for v in value] if isinstance(value, list) else fixed(value) for k, value in args.items()}


_SHORT_YEAR = re.compile(r"(?<![\w'’])['’](\d{2})(?![\d'’]|\w)")


def full_years(args: dict[str, Any], parameters: dict[str, Any], text: str) -> dict[str, Any]:
    """``args`` with a year the request ``text`` writes short ("songs from '19") written whole where the model
    copied its two digits: "Find me some Pop songs from '19 on the Ores Aixmis album." → ``year: 19`` (BFCL live, a
    tuning case read for the first time, 2026-12-07), a year two millennia ago. 00–30 this century, 31–99 the last
    ('55 Chevy, the summer of '42). Only an argument whose name or description says "year" (not "years": a loan's
    term, an age) and does not ask for two digits (a card's ``YY``), a number or two digits, that the request writes
    after an apostrophe with no closing one ("'30' years" is a quote) and not as itself elsewhere (a helper's review,
    2026-12-07)."""
    short = {int(m.group(1)) for m in _SHORT_YEAR.finditer(text)}
    if not short:
        return args
    said = {int(n) for n in re.findall(r"(?<![\d'’.])\d{2}(?![\d.])", _SHORT_YEAR.sub(" ", text))}
    out = dict(args)
    for key, value in args.items():
        spec = _spec(parameters, key)
        about = _said_of(key, spec)
        if not re.search(r"\byear\b", about) or re.search(r"\byy\b|two[- ]digit|%y", about):
            continue
        digits = str(int(value)) if _number(value) and float(value).is_integer() else value  # 19.0 too
        if not isinstance(digits, str) or not re.fullmatch(r"\d{1,2}", digits.strip()):
            continue
        number = int(digits)
        if number in short and number not in said:
            whole = number + (2000 if number <= 30 else 1900)
            out[key] = whole if _number(value) else str(whole)
    return out


def language_names(
    args: dict[str, Any], parameters: dict[str, Any], messages: Sequence[MetonaMessage]
) -> dict[str, Any]:
    """``args`` with a language the user named in words written as the user wrote it, where the model wrote its
    code and the argument takes a language's name (:func:`_takes_a_language_name`): "Translate Hello, how are you?
    from English to French." → ``source_language: "en", target_language: "fr"`` (BFCL multiple, tuning half,
    2026-12-06) becomes ``"English"``, ``"French"`` — what "The language the text is currently in" reads as. Only a
    language named after "from", "to", "into" or "in" ("French restaurants" names a cuisine); one nobody named stays
    as the model wrote it."""
    said = question(messages)
    out = dict(args)
    for key, value in args.items():
        if not isinstance(value, str) or not _takes_a_language_name(key, _spec(parameters, key)):
            continue
        name = _LANGUAGES.get(value.strip().lower())
        spoken = re.search(rf"\b(?:from|to|into|in)\s+({name})\b", said, re.I) if name else None
        if spoken:
            out[key] = spoken.group(1)  # as the user wrote it
    return out


_SQL_VERBS = ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "REPLACE", "PRAGMA")
_SQL_NAMED = re.compile(r"\b(" + "|".join(_SQL_VERBS) + r")\b")  # as a description names a statement: in capitals
_STATEMENT = re.compile(
    r"\s*(?:--[^\n]*\n\s*)*\(*\s*(?:"
    r"(?P<SELECT>select)\b[\s\S]*\bfrom\b|(?P<WITH>with\s+(?:recursive\s+)?\w+\s*(?:\([^)]*\)\s*)?as\s*\()|"
    r"(?P<INSERT>insert)\s+(?:or\s+\w+\s+)?into\b|(?P<UPDATE>update)\s+[\w.\"`\[\]]+\s+set\b|"
    r"(?P<DELETE>delete)\s+from\b|(?P<REPLACE>replace)\s+into\b|"
    r"(?P<CREATE>create)\s+(?:(?:temp|temporary|unique|virtual)\s+)?(?:table|index|view|trigger)\b|"
    r"(?P<DROP>drop)\s+(?:table|index|view|trigger)\b|(?P<ALTER>alter)\s+table\b|(?P<PRAGMA>pragma)\s+\w)",
    re.IGNORECASE,
)
"""A SQL statement's start, by its verb and what must follow it ("DELETE FROM", "UPDATE t SET", "CREATE TABLE",
"WITH x AS ("): "Update the docs", "Delete old files" or "with love from Paris" is no statement."""
_WRITES = re.compile(r"\b(insert|update|delete)\b", re.IGNORECASE)
_RUNS = re.compile(r"\b(?:execut|run)", re.IGNORECASE)
"""A description that says its tool runs statements ("Execute a SELECT query"), not that it explains, checks,
formats, saves or schedules them."""
_REFUSES = re.compile(
    r"\b(?:reject\w*|refuse\w*|not (?:allowed|permitted|supported)|disallow\w*|forbid\w*|prohibit\w*|"
    r"cannot|can'?t|won'?t|never|read[- ]only)\b",
    re.IGNORECASE,
)


def _statement_verb(value: Any) -> str | None:
    """The SQL verb of the statement ``value`` is (:data:`_STATEMENT`; a ``WITH`` is read by what it ends in: an
    INSERT, UPDATE or DELETE it holds, else a SELECT), None for any other value."""
    match = _STATEMENT.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    if match.lastgroup == "WITH":  # by its own words, not a string's or a comment's
        bare = re.sub(r"'(?:[^']|'')*'|\"[^\"]*\"|--[^\n]*|/\*[\s\S]*?\*/", " ", value[match.end() :])
        writes = _WRITES.search(bare)
        return writes.group(1).upper() if writes else "SELECT"
    return match.lastgroup


def _takes_verbs(tool: MetonaToolDef, *, by_name: bool = False) -> set[str]:
    """The SQL statements ``tool`` says it runs: the verbs its description names in capitals where it says it
    executes or runs them ("Execute a SELECT query", "Execute an INSERT, UPDATE, or DELETE query"; not "EXPLAIN a
    SELECT", a validator, a formatter, a scheduler), none where it speaks of refusing any ("INSERT, UPDATE and
    DELETE are rejected"); ``by_name``, also the verb of a name such as ``create_table``, ``drop_index`` (not
    ``delete_table``, which drops a table: no ``DELETE FROM``)."""
    described = tool.description or ""
    runs = _RUNS.search(described) and not _REFUSES.search(described)
    named = set(_SQL_NAMED.findall(described)) if runs else set()
    words = _tool_words(tool.name.rsplit("__", 1)[-1])
    kind = (
        len(words) == 2 and words[0] in ("create", "drop", "alter") and words[1] in ("table", "tables", "index", "view")
    )
    return named | ({words[0].upper()} if by_name and kind else set())


def takes_the_statement(
    tool: MetonaToolDef, args: dict[str, Any], tools: Sequence[MetonaToolDef]
) -> MetonaToolDef | None:
    """The offered tool to run the SQL statement the arguments hold where ``tool`` says it runs others: "Delete all
    rows in orders where status is 'cancelled'" offered mcp-server-sqlite's tools went to ``read_query`` ("Execute a
    SELECT query on the SQLite database", which refuses anything else) with ``DELETE FROM orders …``; the statement
    is ``write_query``'s ("Execute an INSERT, UPDATE, or DELETE query"). The one other offered tool that says it runs
    that statement and takes the same arguments, else None (the call stays as written)."""
    verbs = {v for v in map(_statement_verb, args.values()) if v}
    mine = _takes_verbs(tool)
    if len(verbs) != 1 or not mine or verbs <= mine:
        return None
    verb = next(iter(verbs))
    fitting = []
    for other in tools:
        schema = other.parameters.model_dump(mode="json", exclude_none=True)
        keys = set(schema.get("properties") or ())
        if other.name != tool.name and verb in _takes_verbs(other, by_name=True) and set(args) <= keys:
            if set(schema.get("required") or ()) <= set(args):
                fitting.append(other)
    return fitting[0] if len(fitting) == 1 else None


_GENERIC_VERBS = frozenset("get set search find fetch list lookup look up query current by from to".split())
_A_POINT = re.compile(r"\s*[(（]?\s*(-?\d{1,2}\.\d+)\s*[,，]\s*(-?\d{1,3}\.\d+)\s*[)）]?\s*")
_LOOKED_UP = frozenset("address location place query q name search text".split())


def takes_the_coordinates(
    tool: MetonaToolDef, args: dict[str, Any], tools: Sequence[MetonaToolDef]
) -> tuple[MetonaToolDef, dict[str, Any]] | None:
    """The offered tool that takes a point's latitude and longitude, and its arguments, where the model wrote the
    point as the one thing a look-up by address or name is given: "坐标 22.54, 114.06 是什么地方？" offered the Google
    Maps server's tools went to ``maps_geocode(address: "22.54, 114.06")``; the point is ``maps_reverse_geocode``'s
    (``latitude: 22.54, longitude: 114.06``; a request of this project's own MCP tuning set, 2026-12-06). Only a
    point with decimals, the call's only argument, its name an address, a location, a place, a query or a name; the
    tool that takes it is one other offered tool whose required arguments are a latitude and a longitude and whose
    name is like ``tool``'s (``maps_reverse_geocode`` for ``maps_geocode``, not ``elevation``; of several, the most
    alike). A route's origin, a page range "3, 5", a version list, a note's text are not."""
    schema = tool.parameters.model_dump(mode="json", exclude_none=True)
    if any(_coordinate_key(k) for k in schema.get("properties") or ()):
        return None
    given = {k: v for k, v in args.items() if v not in (None, "", [], {})}
    if len(given) != 1:
        return None
    ((key, value),) = given.items()
    point = _A_POINT.fullmatch(value) if isinstance(value, str) else None
    if point is None or not set(_name_words(key)) & _LOOKED_UP:
        return None
    latitude, longitude = float(point.group(1)), float(point.group(2))
    if abs(latitude) > 90 or abs(longitude) > 180:
        return None

    mine = [w for w in _tool_words(tool.name) if w not in _GENERIC_VERBS]
    fitting = []  # (how alike its name is, the tool, its arguments)
    for other in tools:
        required = other.parameters.model_dump(mode="json", exclude_none=True).get("required") or ()
        lat = [k for k in required if _LATITUDE_WORDS & set(_name_words(k))]
        lon = [k for k in required if _LONGITUDE_WORDS & set(_name_words(k))]
        alike = sum(any(a[:5] == b[:5] for b in mine) for a in _tool_words(other.name) if a not in _GENERIC_VERBS)
        if other.name != tool.name and len(required) == 2 and len(lat) == 1 and len(lon) == 1 and alike:
            fitting.append((alike, other, {lat[0]: latitude, lon[0]: longitude}))
    most = max((alike for alike, _, _ in fitting), default=0)
    closest = [(other, point) for alike, other, point in fitting if alike == most]
    return closest[0] if len(closest) == 1 else None


_ASKS_COORDINATES = re.compile(
    r"\b(?:what(?:'s|\s+(?:is|are|were|was))?|which|find|get|give\s+me|tell\s+me|look\s+up|show\s+me|need)\s+"
    r"(?:me\s+)?(?:the\s+)?(?:exact\s+|precise\s+|gps\s+|geographic(?:al)?\s+)?"
    r"(?:lat(?:itude)?\s*(?:/|and|&|,)\s*(?:long|lng|lon)(?:gitude)?|coordinates|co-ordinates|latitude|longitude)\b"
    r"|(?:经纬度|坐标|纬度|经度)\s*(?:是|为)?\s*(?:多少|什么|几|在哪)"
    r"|(?:查|找|给我|告诉我|看看|获取|求)[^，。？！,?!]{0,16}?(?:的)?(?:经纬度|坐标)",
    re.IGNORECASE,
)
_MORE_ASKED = re.compile(r"\b(?:and|then|also|plus|with)\b|[,，;；]|然后|并|再|顺便|和|处|的|上|里")
"""What follows a request for coordinates when it asks for more than them (the forecast there, the elevation at
that point): :func:`asks_its_inputs` lets the tool be."""
_LATITUDE_WORDS = frozenset(("lat", "latitude"))
_LONGITUDE_WORDS = frozenset(("lon", "lng", "long", "longitude"))
_COORDINATE_WORDS = (
    _LATITUDE_WORDS | _LONGITUDE_WORDS | frozenset("latlng latlon coord coords coordinate coordinates".split())
)


def _coordinate_key(key: str) -> bool:
    """An argument's name that says latitude, longitude or coordinates by a whole word (not ``template``,
    ``platform``, ``long_url``'s "long" beside another word: ``long`` alone only)."""
    words = _name_words(key)
    return bool(set(words) & (_COORDINATE_WORDS - {"long"})) or words == ["long"]


def asks_its_inputs(tool: MetonaToolDef, messages: Sequence[MetonaMessage]) -> bool:
    """The request asks for the coordinates that ``tool`` takes as its only input, and the conversation states no
    number: "杭州西湖的经纬度是多少" offered the Google Maps server's tools went to ``maps_reverse_geocode(latitude,
    longitude)`` with coordinates the model recalled — the answer given as the question. The address-to-coordinates tool
    (``maps_geocode``) is what answers it (:meth:`LocalAdapter._tool_step` decides again without this one)."""
    schema = tool.parameters.model_dump(mode="json", exclude_none=True)
    required = list(schema.get("required") or ())
    if not required or not all(_coordinate_key(k) for k in required):
        return False  # a tool that takes more than the point (a search near it, a route) is not judged
    asked = question(messages)
    match = _ASKS_COORDINATES.search(asked)
    if match is None or _MORE_ASKED.search(asked[match.end() :]):
        return False  # "…the coordinates of Zermatt and get me the forecast there": the tool's own part asked too
    return not re.search(r"\d", _conversation_text(messages))


def _a_code(key: str, value: str, spec: dict[str, Any]) -> bool:
    """``value`` is a code (two to four capitals) for an argument whose name or description asks for one: a currency,
    a country, a language, an airport, a ticker. Its letters need not be the words the user said ("Convert 150
    Euros to Canadian dollars" → ``to_currency: "CAD"``, "from Euro to Dollar" → ``USD``). On the tuning half
    (2026-12-05) the possible answers hold 5 such required codes none of whose letters start a word of the request
    (USD, GBP, CAD, GB); 2 of 48 fresh multiple-function cases were not called for it."""
    return bool(_CODE.fullmatch(value.strip())) and bool(_CODED.search(f"{key} {spec.get('description') or ''}"))


def _stands_for_nothing(code: str, said: set[str], text: str) -> bool:
    """``code`` (:func:`_a_code`) stands for nothing the conversation (``text``, its words ``said``) names: no name
    within a sentence (:data:`_PROPER_NOUN`), no Chinese, no currency's name, no word after "from", "to", "in", "of"
    … (:data:`_PLACE_OF`: "from shanghai to beijing", "holidays in germany", "into chinese") and no word begins with
    the code's first letter — "I need a round trip flight" offered a flight search → ``origin_airport: "JFK",
    destination_airport: "LAX"`` (BFCL's real users' no-call kind, tuning half, 2026-12-06)."""
    lowered = text.lower()
    if _CJK.search(text) or any(_PROPER_NOUN.search(line.strip()) for line in text.splitlines()):
        return False
    if _CURRENCY_NAME.search(lowered):
        return False
    if _PLACE_OF.search(text):
        return False  # "from shanghai", "into chinese", "in germany", "of alphabet": something named, in lower case
    first = code.strip()[:1].lower()
    return not any(len(word) >= 2 and word.startswith(first) for word in said)


_PLACE_OF = re.compile(
    r"\b(?:from|to|into|in|of|at|near|between|for|via)\s+(?:(?:a|an|the|my|our)\s+)?(?!(?:a|an|the|my|our|me|it)\b)"
    r"[^\W\d_]{2,}",
    re.IGNORECASE,
)
"""A word after "from", "to", "in", "of"…: what a code may stand for, however it is written
(:func:`_stands_for_nothing`)."""


def _names_a_file(key: str) -> bool:
    """An argument's name whose last word is ``path``, ``file``, ``filename`` or ``filepath`` (``file_path``,
    ``imagePath``; not ``profile``)."""
    words = _name_words(key)
    return bool(words) and words[-1] in ("path", "file", "filename", "filepath")


def _squeezed(text: str) -> str:
    """``text`` lower-case without spaces, ``_`` and ``-``: a name as written and as the model spelled it alike."""
    return re.sub(r"[\s_-]+", "", text.lower())


def _described(value: Any, spec: dict[str, Any]) -> bool:
    """``value``, a number, is the argument's declared default or a number its own description states ("The size
    of the deck. Default is 52." → ``deck_size: 52``, a bound of "(0-100)"; "What is the probability of getting a
    full house in poker?" had been refused as numbers nobody gave, BFCL simple, a tuning case)."""
    if not _number(value) or not abs(value) <= 1e15:  # an id-length number (or inf, nan) is no figure
        return False
    written = [float(n) for n in _DECIMAL.findall(str(spec.get("description") or ""))]
    return _is_default(value, spec) or float(value) in written  # a range's bounds too: "(0-100)"


ROUND_FACTORS = (1, 7, 12, 24, 60, 100, 365, 1000, 1440, 3600, 86400, 604800, 1_000_000)
"""What a number the conversation gives may be multiplied or divided by and still be the user's: a percentage as a
fraction, a unit's step (hours, minutes and seconds, days and weeks, months, years, thousands, millions)."""
_AMOUNT_WORDS = re.compile(
    r"\b(?:half|quarter|couple|few|several|dozens?|score|hundreds?|thousands?|millions?|billions?|trillions?|"
    r"decades?|century|centuries|full|max(?:imum)?|min(?:imum)?|double|triple|twice|thrice|all the way|"
    r"\d+0'?s|(?:twen|thir|for|fif|six|seven|eigh|nine)ties)\b|\d\s?[kmb]\b",
    re.IGNORECASE,
)
"""Words that state an amount without its digits ("half an hour", "a thousand dollars", "the 90s", "$2.5M", "all the
way up"): where the conversation holds one, a round figure is not judged (:func:`_a_round_guess`)."""
_SETTING_WORDS = frozenset(
    "max min limit count num number top size page radius result results timeout length offset depth precision "
    "round decimal decimals k n rows items level volume brightness percent percentage".split()
)
"""Words of an argument's name that make it a setting of the call (``max_results``, ``pageSize``, ``radius``), whose
round value the model picks as a default would be: not judged as made up."""


HOUR_AND_MINUTE_STEPS = (60, 3600)
"""An hour in minutes or a minute in seconds (60), an hour in seconds (3600): what "an hour", "a minute" come to,
no number said."""


def _a_round_guess(key: str, value: Any, spec: dict[str, Any], given: Sequence[int | float]) -> bool:
    """``value``, a required plain number, is a round figure (10, 100, 200, 1000: a whole multiple of ten) that no
    number the conversation gives (``given``, digits and words, :func:`_all_stated`) is, nor comes to by a common
    unit's factor (:data:`ROUND_FACTORS`), nor the argument's default or a number its description states
    (:func:`_described`): the figure the model fills in for what nobody said. Where no offered function fitted:
    "How much electricity will I need for my 2000 sq ft home?" → ``average_sunlight_hours: 10``, "What's the recipe
    to cook five chicken" → ``per_unit_time: 10``, "…the neurological impact of sports…" → ``caffeine_content:
    200``, "I would like to make a transaction with Diego." → ``amount: 100``; of 144 right recorded calls of the
    tuning half (BFCL simple, multiple and live, MCP one and several, 2026-12-06), none holds one. A count the model
    knows is let be (13 hearts in a deck, 7 days for "next week", 1 for "next month": any required number nobody
    gave would have refused 4 of those 144), and so is a setting of the call (:data:`_SETTING_WORDS`:
    ``max_results: 10`` for "Search the news for climate change"). The caller judges no request asked in Chinese
    (whose amounts in characters, 五百, 两千, are not all read) nor one holding an amount in words
    (:data:`_AMOUNT_WORDS`)."""
    if not _number(value) or not abs(value) <= 1e15 or spec.get("enum") or number_choices(spec):
        return False  # an id-length number (or inf, nan) is no figure
    if _described(value, spec) or _SETTING_WORDS & set(_name_words(key)):
        return False
    if value < 10 or not float(value).is_integer() or int(value) % 10 or value in HOUR_AND_MINUTE_STEPS:
        return False
    return not any(math.isclose(value, n * f) or math.isclose(value * f, n) for n in given for f in ROUND_FACTORS)


_WHEN_WORDS = re.compile(
    r"\b(?:today|tonight|tomorrow|yesterday|now|next|this|coming|last|upcoming|current(?:ly)?|weekends?|weeks?|"
    r"months?|years?|days?|weekdays?|morning|evening|afternoon|later|soon|asap|tonite|christmas|xmas|eve|"
    r"night|valentine'?s?|thanksgiving|easter|halloween|holidays?|summer|winter|spring|autumn|calendar|schedule|agenda|"
    r"meetings?|appointments?|jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|"
    r"july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|(?:mon|tue(?:s)?|wed(?:nes)?|"
    r"thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?s?|hours?|hrs?|minutes?|mins?|noon|midnight|o'?clock|tmrw?|tmr|"
    r"tomm?orr?ow|2morrow|eod|eow|q[1-4]|quarters?|deadline|due|diwali|hanukkah|ramadan|eid)\b"
    r"|\d\s*[ap]\.?m\b|\d{1,2}:\d{2}|今|明|昨|前天|后天|周|星期|礼拜|号|日|月|年|节|春|夏|秋|冬|"
    r"安排|日程|会议|待会|稍后|小时|分钟|点|早|晚|午|凌晨|会儿|元旦|除夕|国庆|中秋|端午|天后|之后",
    re.IGNORECASE,
)
"""Words that say when (a day, a month, a season, a holiday, "next", "this", "later", an hour or a time of day,
"tmrw", "EOD") or speak of the user's calendar (a schedule, meetings): a date argument of a request holding one is
the user's."""
_A_DATE = re.compile(
    r"(?<![\w.-])(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}\b|\d{4}[./]\d{1,2}[./]\d{1,2}\b)(?!\.\d)"
    r"|\d{4}年\d{1,2}月\d{1,2}[日号]"
)
"""A date in digits: ISO (``2023-04-15``), day or month first (``15-04-2023``, ``04/15/2023``, ``15.04.2023``), year
first with slashes or dots (``2023/04/15``, ``2023.04.15``), or in Chinese (``2023年4月15日``); not the end of an
address (``10.0.1.2024``)."""


def _an_untold_date(value: Any, text: str, stated: Sequence[int | float]) -> bool:
    """``value`` holds a date (``2023-04-15``), the conversation ``text`` holds no word of when
    (:data:`_WHEN_WORDS`) and none of the numbers it states (``stated``; the caller asks first that no ordinal word
    says one: "on the first") is the date's year, month or day: "Get me tickets to see Toto." → ``date:
    "2023-04-15"``, "Search for something under the Play genre near Seattle." offered a bus search →
    ``departure_date: "2023-04-15"``, "Can you assist me in scheduling a flight with IndiGo airlines?" offered a
    form's finish → ``default_date: "15-04-2023"`` (BFCL's real users' no-call kind, tuning half, 2026-12-06;
    none of the 144 right recorded calls beside them holds one); a count is no date: "I need 1 train ticket,
    departing from Portland and going to Seattle please." → ``date_of_journey: "2023-04-15"`` (the same kind, a
    further tuning case, 2026-12-06). Any :data:`_A_DATE` form; "on the 15th", "15/4", "in 2023" let it be."""
    match = _A_DATE.search(value) if isinstance(value, str) else None
    if match is None or _WHEN_WORDS.search(text):
        return False
    parts = {int(p) for p in _DIGITS.findall(match.group(0))}
    digits = {int(d) for d in _DIGITS.findall(text.translate(_ASCII_DIGITS))}  # a date's own, as written too
    return not parts & (digits | {int(n) for n in stated if float(n).is_integer()})


_NO_VALUE = frozenset(
    ("none", "n/a", "unknown", "null", "nil", "unspecified", "undefined", "not specified", "not provided",
     "not given", "not available", "not applicable")
)  # fmt: skip


_NEGATION = re.compile(
    r"\b(?:no|not|none|nothing|without|never|don'?t|doesn'?t|didn'?t|haven'?t|hasn'?t|isn'?t|aren'?t|can'?t|n/a|"
    r"skip|leave (?:it|that) (?:blank|empty|out))\b|没有|没|无|不要|不需要|不用|别|免",
    re.IGNORECASE,
)
"""Words that say something is not there or not wanted: a value written as its absence is the user's then
(:func:`_no_value`)."""


def _no_value(value: Any, spec: dict[str, Any], said: str) -> bool:
    """A required string the model wrote as the absence of a value ("none", "N/A", "unknown", "not specified") that
    the argument offers no such choice of (not its enum's, its default, nor its description's words) and the
    conversation (``said``, lower case) neither says nor negates anything (:data:`_NEGATION`: "no special
    requests" → ``special_requests: "none"`` is the user's): "What is the highest grossing movie of all time?" →
    ``title: "none"``. The possible answers of the tuning half hold such values only for optional arguments (a command's
    ``unit: "N/A"``, a default's "Not specified")."""
    if not isinstance(value, str) or " ".join(value.lower().split()) not in _NO_VALUE:
        return False
    if _NEGATION.search(said):
        return False  # "no special requests", "I don't have a referral code", 没有备注: the absence is the user's
    word = " ".join(value.lower().split())
    offered = [*(str(v).lower() for v in spec.get("enum") or ()), str(spec.get("default", "")).lower()]
    return word not in offered and word not in str(spec.get("description") or "").lower() and word not in said


_ORDINAL_WORDS = re.compile(
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\w+teenth|twentieth|"
    r"thirtieth|twenty[\s-]\w+|thirty[\s-]first)\b",
    re.IGNORECASE,
)
"""An ordinal in words ("on the first", "the twenty-third"): a day of the month :func:`_all_stated` does not read,
so a date beside it is not judged made up (:func:`_an_untold_date`)."""
_CLOCK = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?")
"""A time of day and nothing else (``06:00``, ``9:30:00``): made up where the conversation holds no number at all
(:func:`made_up`)."""


def _unnamed_file(value: Any, said: set[str], written: str) -> bool:
    """``value`` is a file's path whose name (its last part, the extension aside) has words and the conversation gave
    none of them (``said``: ``path/to/summary_statistics.csv`` for "Explain bar chart of Patient."), or that has an
    extension and a stem the conversation (``written``) never wrote, spaces, ``_`` and ``-`` aside
    (:func:`_squeezed`: "Sales Q3.xlsx" is ``sales_q3.xlsx``, "打开会议纪要" is ``会议纪要.md``): a name put together
    from the request's words ("My cat keeps scratching the sofa, any tips?" → ``read_file(path:
    "cat_scratching_sofa.txt")``, requests written for this, 2026-12-06; "Explain bar chart of Patient." →
    ``data/patient_chart.png``, BFCL's real users' no-call kind, a tuning case). Each of the tuning half's possible
    answers that holds a file (single, multiple, real users': 5) writes it as its request does."""
    if not isinstance(value, str):
        return False
    name = re.split(r"[\\/]", value.strip())[-1]
    stem = name.rsplit(".", 1)[0]
    if _unsaid(re.sub(r"[_.-]+", " ", stem), said):
        return True
    squeezed = _squeezed(stem)
    return bool(_EXTENSION.search(name)) and bool(squeezed) and squeezed not in _squeezed(written)


_SALIENT = re.compile(
    r"(?<![\w.])(?:v\d+(?:\.\d+)+|\d+(?:\.\d+){2,}|\d{6,}(?:\.\d+)?|[A-Za-z_-]*\d[A-Za-z0-9_-]*[A-Za-z][A-Za-z0-9_-]*"
    r"|[A-Za-z][A-Za-z_-]*\d[A-Za-z0-9_-]*)(?![\w])|\"([^\"]{3,})\"|“([^”]{3,})”"
)
"""What a request states that only a call can carry: an id or a code with digits (``cus_NffrFeUfNV2Hib``,
``5qk2m8vtd1b3``), a version (``v1.30.0``), a long number (a timestamp), a quoted text."""
_NO_ID = re.compile(r"\d+(?:st|nd|rd|th|[a-z]{1,3})|(?:19|20)\d\d\.\d{1,2}\.\d{1,2}|[A-Za-z0-9]{1,4}", re.I)
"""Not such a thing: an ordinal, a quantity with its unit (``298K``, ``440Hz``), a dotted date, a short code
(``CO2``)."""
_NEXT_STEP = re.compile(r"\b(?:then|after that|afterwards|and also)\b|然后|之后|接着|再|并且|[;；]", re.I)
_STEP_AFTER = re.compile(
    r"\band\s+(?:\w+\s+)?(?:refund|forward|send|link|tag|merge|close|reply|post|assign|comment|add|move|delete|notify"
    r"|share|email|tweet|update|create|open|approve)\b|[，,]\s*(?:把|如果|转发|发给|并|就)|转发给|发给",
    re.I,
)
"""A second deed joined by "and" or a Chinese comma ("Look up order ORD-88123 and refund charge ch_1", "查一下订单
ORD-88123，把扣款 ch_1 退了"): what it names may be the next call's."""
_CARRIERS = (
    (re.compile(r"v\d+(?:\.\d+)+|\d+(?:\.\d+){2,}"), frozenset("tag version release ref".split())),
    (re.compile(r"\d{6,}\.\d+"), frozenset("ts timestamp time".split())),
    (re.compile(r"\d{6,}"), frozenset("ts timestamp time id ids".split())),
    (re.compile(r".*"), frozenset("id ids key number sha ref code slug".split())),
)
"""What argument may carry a version, a long number (a timestamp or an id: "视频任务 106916112212032") or an id, by
its name's words."""
_TEXT_CARRIERS = frozenset("text body content comment message note description summary title reply".split())
"""What argument may carry a quoted text, by its name's words (``rich_text``, ``comment``, ``body``)."""


def _id_carriers(token: str) -> frozenset[str]:
    """The words of an argument's name that may carry ``token`` (a version, a long number, an id: :data:`_CARRIERS`)."""
    return next(words for kind, words in _CARRIERS if kind.fullmatch(token))


def _argument_words(tool: MetonaToolDef) -> set[str]:
    """The words of a tool's argument names, its nested objects' (one level) too (``params.receive_id``)."""
    schema = tool.parameters.model_dump(mode="json", exclude_none=True)
    names: list[str] = []
    for key, spec in (schema.get("properties") or {}).items():
        names.append(key)
        if isinstance(spec, dict):
            names += list((spec.get("properties") or (spec.get("items") or {}).get("properties") or {}).keys())
    return {w for n in names for w in _name_words(str(n))}


def _alnum(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def _holds(token: str, args: dict[str, Any]) -> bool:
    """The call holds ``token`` however written: its letters and digits alone, without a leading v
    (``v2.3.0`` as ``2.3.0``), or a run of six digits or more of it (a permalink's ``p1699999999000200``)."""
    held = _alnum(json.dumps(args, ensure_ascii=False))
    bare = _alnum(token)
    return bare in held or bare.lstrip("v") in held or any(run in held for run in re.findall(r"\d{6,}", bare))


def _composes(args: dict[str, Any]) -> bool:
    """The call writes a text of its own: a string value of two words or more, or of four Chinese characters."""
    return any(re.search(r"\S+\s+\S+|[\u3400-\u9fff]{4,}", s) for s in _strings_in(args))


def _not_as_a_number(args: dict[str, Any], carriers: frozenset[str]) -> dict[str, Any]:
    """``args`` without the numbers written for an argument no id is carried by (``duration: 106916112212032``
    for "视频任务 106916112212032 生成好了没？" — a task's id put where a length goes is not held)."""
    return {
        k: v
        for k, v in args.items()
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and not set(_name_words(k)) & carriers)
    }


def left_unsaid(tool: MetonaToolDef, args: dict[str, Any], text: str, tools: Sequence[MetonaToolDef]) -> list[str]:
    """What the request ``text`` states that only a call can carry (:data:`_SALIENT`: a version, a long number, an
    id, a quoted text), that the picked ``tool``'s call ``args`` hold nowhere (:func:`_holds`) and that the tool has
    no argument for while another offered tool has (:data:`_CARRIERS`, :data:`_TEXT_CARRIERS`, by the arguments'
    names): offered GitHub's release tools, "kubernetes/kubernetes 的 v1.30.0 这个 release 具体写了些什么？" went to
    ``list_releases`` (no tag; ``get_release_by_tag`` takes one); "Leave a comment on the Notion page … saying
    \"Looks good to me, ship it\"" to ``retrieve-a-comment``; a Slack message's timestamp to ``post_message`` for a
    reaction; "Decline the invite … and tell them \"I have a conflict that day\"" to ``delete-event`` (a blind set
    of other people's tools, 2026-12-06: 4 of its 9 wrong picks of a neighbour). A quoted text counts only where the
    call writes no text of its own (:func:`_composes`: a quote translated or trimmed is held). A review over 74
    hand-written requests (2026-12-07) found a first version discarding right picks for an id written in another
    form, a version without its v, an id that had nothing to do with the call, and a second step's id; of 357
    recorded right picks of the tuning sets' several-tool cases (BFCL, the MCP sets, both blind sets) none leaves
    such a thing unsaid. Not for a request of several steps (:data:`_NEXT_STEP`, :data:`_STEP_AFTER`) nor a tool on
    a file or a folder (a ``path``: a name may be the next file's, a quoted text the one a listing is kept for)."""
    if _NEXT_STEP.search(text) or _STEP_AFTER.search(text) or _path_argument(tool) is not None:
        return []
    mine = _argument_words(tool)
    theirs = [_argument_words(t) for t in tools if t.name != tool.name]
    out = []
    for m in _SALIENT.finditer(text):
        quoted = m.group(1) or m.group(2)
        token = quoted or m.group()
        if quoted:
            if _composes(args) or quoted.lower() in json.dumps(args, ensure_ascii=False).lower():
                continue
            carriers = _TEXT_CARRIERS
        else:
            carriers = _id_carriers(token)
            if _NO_ID.fullmatch(token) or _holds(token, _not_as_a_number(args, carriers)):
                continue
        if not mine & carriers and any(words & carriers for words in theirs):
            out.append(token)
    return out


_PREFIX_PATH = re.compile(r"(?<![\w:/.])/[\w.@-]+(?:/[\w.@*-]*)+")
"""A path-like name the request writes (``/aws/lambda/order-``, ``/var/log/``): not a web address's."""
_MONTH_NAME = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\b\.?"
)
_WRITTEN_DATE = re.compile(
    rf"\b(?P<mn>{_MONTH_NAME})\s+(?P<md>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<my>(?:19|20)\d\d)\b"
    rf"|\b(?P<dd>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<dn>{_MONTH_NAME}),?\s+(?P<dy>(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
"""A date with its month's name ("September 30, 2025", "30th of Sept 2025"; not "Decision 2, 2024");
:data:`_A_DATE` reads digits."""
_MONTH_STARTS = "jan feb mar apr may jun jul aug sep oct nov dec".split()


def _calendar_days(text: str) -> list[tuple[int, int, int, int]]:
    """The dates ``text`` writes, as (start, year, month, day) — both orders of a slashed or dotted date with the
    year last (``04/05/2025``) —, in digits (:data:`_A_DATE`) or with a month's name (:data:`_WRITTEN_DATE`)."""
    out = []
    for m in _A_DATE.finditer(text):
        parts = [int(p) for p in re.findall(r"\d+", m.group())]
        if parts[0] > 31:  # year first
            out.append((m.start(), parts[0], parts[1], parts[2]))
        else:
            out += [(m.start(), parts[2], parts[1], parts[0]), (m.start(), parts[2], parts[0], parts[1])]
    for m in _WRITTEN_DATE.finditer(text):
        name, day, year = (m["mn"], m["md"], m["my"]) if m["mn"] else (m["dn"], m["dd"], m["dy"])
        out.append((m.start(), int(year), _MONTH_STARTS.index(name[:3].lower()) + 1, int(day)))
    return sorted(out)


def _days_in(value: Any) -> set[tuple[int, int, int]]:
    return {d[1:] for d in _calendar_days(" ".join(_strings_in(value)))}


_FROM_DATE = re.compile(r"(?:\b(?:from|since|after|starting(?: on| from)?|beginning)|从|自)\s*$", re.I)
_TO_DATE = re.compile(r"(?:\b(?:to|until|till|through|before|ending(?: on)?)|到|至|~|–|-)\s*$", re.I)
_STARTS = frozenset("start from since after begin".split())
_ENDS = frozenset("end to until before".split())
_A_DATE_WORD = frozenset("date time datetime timestamp since until after before".split())
_NOT_A_DATE = frozenset("zone timezone tz format unit units type range window".split())
_NAMED_FILE = re.compile(
    r"(?:\b(?:save[sd]?|store[sd]?|write|named|name it|call(?:ed)?(?: it)?|as|file ?name(?: is)?)"
    r"|文件名(?:就)?(?:叫|是|为)?|叫做|叫|存成|存为|保存为|保存成|命名为|另存为)\s*(?:it\s+)?(?:as\s+)?[:：]?\s*$",
    re.I,
)
_OUTPUT_FILE = frozenset("filename output outfile destination dest save".split())
_STARTS_WITH = re.compile(r"\bprefix|\bstart(?:s|ing)? with|\bbegin(?:s|ning)? with|开头|前缀", re.I)
_SAYING = re.compile(
    r"(?:\b(?:saying|that says|says|say|with (?:the |a )?(?:text|message|note|comment|description|body|memo)"
    r"|(?:note|comment|description|message|reply|body|memo)(?: (?:is|as|of))?)"
    r"|备注|留言|说明|描述|内容|正文|回复|注明|写上|写|说)\s*[:：,，]?\s*$",
    re.I,
)
_TEXT_ARGUMENT = _TEXT_CARRIERS | {"memo"}


_A_NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w%]|[.,]\d)")
"""A number as a request writes it (``20``, ``2,000,000``, ``0.5``; not ``5%``, ``v2``, ``3.1.4``)."""


_CLAUSE_END = re.compile(r"[,;:.!?，。；：]")


def _typed(spec: dict[str, Any], *kinds: str) -> bool:
    kind = spec.get("type", "string")
    return any(k in (kind if isinstance(kind, list) else [kind]) for k in kinds)


def dropped_statements(parameters: dict[str, Any], args: dict[str, Any], text: str) -> dict[str, list[Any]]:
    """The optional arguments (of the tool's ``parameters``) the call ``args`` left out that the request ``text``
    settles in so many words, each with what it states for it: a date after "from"/"since" for the one unfilled
    argument that starts a span, one after "to"/"until" for the one that ends it ("the alarm's history from
    2025-06-10 00:00 to 2025-06-11 00:00 UTC" → ``start_time``, ``end_time`` left out); a file's name after "save
    as"/"named"/文件名叫 for the one unfilled output file argument ("文件名就叫 pricing-page.jpeg" → ``filename``); a
    path the request says things start with for the one unfilled ``…prefix`` ("名字以 /aws/lambda/order- 开头" →
    ``log_group_name_prefix``); a double-quoted text after "saying"/"note"/备注写 for the one unfilled text argument
    (「批发客户，月结」 → ``note``); a number next to a word of the one unfilled number argument's name ("max 20
    items" → ``max_items``). The arguments step is asked again with these required (:func:`requiring`,
    :func:`with_dropped`). On 545 recorded calls of the tuning sets (BFCL, the MCP sets, both blind sets;
    2026-12-07) a first version found something on 5 wrong calls, 4 of them the value the possible answers want,
    and on none of the 437 right ones; a review (2026-12-07, 134 hand-written calls) found it filling arguments
    from a date that was the content ("the deadline is 2025-06-30"), an input file ("like logo.png but blue"), a
    version, a task's quoted name, a number beside a word that merely began with the argument's ("27 countries" →
    ``count``), hence the cues."""
    properties = {k: v for k, v in (parameters.get("properties") or {}).items() if isinstance(v, dict)}
    required = set(parameters.get("required") or ())
    unfilled = {k: v for k, v in properties.items() if k not in required and k not in args and not v.get("enum")}
    strings = {k: set(_name_words(k)) for k, v in unfilled.items() if _typed(v, "string")}
    out: dict[str, list[Any]] = {}

    def one(fitting: list[str], found: list[Any]) -> None:
        fitting = [k for k in fitting if k not in out]
        if found and len(fitting) == 1:
            out[fitting[0]] = found

    held = _days_in(args)
    dated = {k for k, v in unfilled.items() if str(v.get("format", "")).startswith("date")}
    dates = {k for k, w in strings.items() if (k in dated or w & _A_DATE_WORD) and not w & _NOT_A_DATE}
    readings: dict[int, list[tuple[int, int, int]]] = {}
    for start, *day in _calendar_days(text):  # both readings of 04/05/2025 at one place
        readings.setdefault(start, []).append((day[0], day[1], day[2]))
    for start, days in readings.items():
        if held & set(days):
            continue
        before = text[max(0, start - 24) : start]
        if _FROM_DATE.search(before):
            one([k for k in dates if strings[k] & _STARTS], days)
        elif _TO_DATE.search(before) and re.search(r"\d", before):  # "to" after a first date: the span's end
            one([k for k in dates if strings[k] & _ENDS], days)
    files = [f for f in named_paths(text) if not _holds(f, args) and _NAMED_FILE.search(text[: text.find(f)])]
    one([k for k, w in strings.items() if w & _OUTPUT_FILE or w == {"file"}], files)
    if _STARTS_WITH.search(text):
        paths = [m.group() for m in _PREFIX_PATH.finditer(text) if not _holds(m.group(), args)]
        one([k for k, w in strings.items() if "prefix" in w], paths)
    quoted = [(m.start(), m.group()[1:-1].strip()) for m in _DOUBLE_QUOTED.finditer(text)]
    said = [q for at, q in quoted if _SAYING.search(text[:at]) and not _holds(q, args)]
    one([k for k, w in strings.items() if w & _TEXT_ARGUMENT], said)
    held_numbers = set(_numbers_in(args))
    numbers = [(m.start(), float(m.group().replace(",", ""))) for m in _A_NUMBER.finditer(text)]
    numbers = [(at, n) for at, n in numbers if n not in held_numbers and int(n) not in _dated(text)]
    words = [(m.start(), m.group().lower()) for m in _WORD.finditer(text)]
    claimed: dict[float, list[str]] = {}
    for key, spec in unfilled.items():
        if not _typed(spec, "number", "integer"):
            continue
        named = [at for at, w in words for n in _name_words(key) if len(n) >= 4 and w in (n, n + "s", n + "es")]
        near = [(abs(at - word), at, n) for at, n in numbers for word in named
                if abs(at - word) <= 16 and not _CLAUSE_END.search(text[min(at, word) : max(at, word)])]  # fmt: skip
        if near:
            claimed.setdefault(min(near)[2], []).append(key)  # the number nearest a word of its name
    for number, keys in claimed.items():
        one(keys, [int(number) if number.is_integer() else number])
    return out


def requiring(schema: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """The arguments ``schema`` with ``keys`` required too (:func:`dropped_statements`)."""
    extra = [k for k in keys if k in (schema.get("properties") or {})]
    return {**schema, "required": [*(schema.get("required") or ()), *extra]}


def with_dropped(args: dict[str, Any], again: dict[str, Any] | None, stated: dict[str, list[Any]]) -> dict[str, Any]:
    """``args`` with each argument of ``stated`` the second writing (``again``) gave what the request states for
    it — that date, that name, that text, that number; anything else it wrote is not taken."""
    out = dict(args)
    for key, found in stated.items():
        if not again or key not in again:
            continue
        value = again[key]
        if isinstance(found[0], tuple):
            ok = bool(_days_in(value) & set(found))
        elif isinstance(found[0], str):
            size = len(_alnum(value)) if isinstance(value, str) else 0
            ok = isinstance(value, str) and any(
                _holds(f, {key: value}) and size <= 2 * len(_alnum(f)) + 8 for f in found
            )
        else:
            ok = not isinstance(value, bool) and isinstance(value, (int, float)) and value in found
        if ok:
            out[key] = value
    return out


def carrying(tokens: Sequence[str], tools: Sequence[MetonaToolDef]) -> list[MetonaToolDef]:
    """Those of ``tools`` with an argument that may carry each of ``tokens`` (:func:`left_unsaid`'s: an id, a
    version, a timestamp, a quoted text; by the arguments' names), or all of them when none has: "视频任务
    106916112212032 生成好了没？" sent back from a video generator had gone to ``play_audio`` (its file path) when
    ``query_video_generation`` takes a ``task_id`` (a blind set of other people's tools, 2026-12-07)."""

    def kinds(token: str) -> frozenset[str]:
        found = _SALIENT.fullmatch(token)
        if found is None or found.lastindex:  # a quoted text's words
            return _TEXT_CARRIERS
        return _id_carriers(token)

    fitting = [t for t in tools if all(_argument_words(t) & kinds(token) for token in tokens)]
    return fitting or list(tools)


def made_up(
    args: dict[str, Any], parameters: dict[str, Any], messages: Sequence[MetonaMessage], described: str = ""
) -> list[str]:
    """The required arguments the model made up where the conversation (what the user wrote, the turn's tool
    results) left them out: a string whose value reads as a name or an id (:func:`_a_name`) that nothing gave
    ("What time is it?" offered a weather tool → ``location: "San Francisco, CA"``, "I have a transaction, can
    you do it?" → ``receiver: "john_doe"``); and where the conversation gave no number at all, in digits or in
    words, and named nothing to look one up by (:func:`_numbers_given`), a string of numbers and arithmetic
    only (:data:`_FORMULA`: "Good morning! I finished my thesis." offered a calculator → ``expression: "100 *
    0.075"``) and the numbers of a call whose every required argument, two or more or one that holds two
    numbers or more, is numbers only (a number, coordinates; "How can the deer population grow?" →
    ``current_population: 1000, birth_rate: 0.05``, "Which country has the most lakes?" →
    ``maps_elevation(locations: [{latitude: 40.71, …}, …])``; not "What's the weather in Berlin?" → its
    coordinates (a named place lets a place's numbers through, :func:`_a_places_numbers`, not a BMI's weight
    and height for "the average temperature for Los Angeles"), nor "roll a die" → ``sides: 6``; a call with a
    named file and its size is judged by the name), and a time of day (:data:`_CLOCK`: "奥斯陆明天几点日出？" →
    ``convert_time(time: "06:00")``, the time it asks after); and a file (a required argument named ``path``,
    ``file``, ``filename``, ``filepath``: :func:`_names_a_file`) whose name nobody gave
    (:func:`_unnamed_file`; on the tuning half, 2026-12-05, every one of the 16 files
    the possible answers hold is named by its request). Such a call is not made; the answer is written instead
    (it can ask for what is missing); prose where a formula of numbers is asked for
    (:func:`_prose_for_a_formula`), or one number (:func:`_a_constant`); a placeholder nobody wrote
    (:func:`_placeholder`: ``your_token_here``, ``user123``, ``12345``); an object whose keys hold nothing
    (:func:`_hollow`); a number for an id nobody wrote (:func:`_untold_id`); a code that stands for nothing the
    conversation names (:func:`_stands_for_nothing`); a web address, any argument's, whose host nothing wrote
    (:func:`_unknown_address`;
    ``described``: the tool's description and the system prompt); a password or a key nobody gave
    (:func:`_untold_secret`). A word matches one it starts or that starts it (three letters or more: ``EUR``
    and "euros"). Not judged: an enum's choice, a number worked out from others (any number in the
    conversation lets every number through, but a round figure none of them comes to: :func:`_a_round_guess`), dates
    and times (but a time of day where no number was given, and a date where nothing says when and none of its
    numbers was said: :func:`_an_untold_date`),
    text the model composes (a sentence, lower-case words), the names and the numbers-only calls of a request
    asked in Chinese (its formulas and files are: "人体正常体温是多少度？" offered a calculator → ``expression:
    "37"``)."""
    said = _said_words(messages)
    required = set(parameters.get("required") or ())
    out = []
    numbers = [  # the numbers of the call's own choosing: not an enum's, nor what the argument's description states
        k
        for k in sorted(required & set(args))
        if _numbers_only(args[k])
        and not _spec(parameters, k).get("enum")
        and not _described(args[k], _spec(parameters, k))
    ]
    chinese = bool(_CJK.search(question(messages)))  # no capitals to tell a place by: its coordinates are let be
    looked_up = _a_places_numbers(args, numbers, parameters)  # a named place's coordinates, not a named thing's weight
    several = len(numbers) >= 2 or (len(numbers) == 1 and len(_numbers_in(args[numbers[0]])) >= 2)  # a list of points
    if several and len(numbers) == len(required) and not chinese and not _numbers_given(messages, looked_up):
        out += numbers  # every input of the call a number, and the conversation gave none nor a place to look up
    clocks = [k for k in sorted(required & set(args)) if isinstance(args[k], str) and _CLOCK.fullmatch(args[k].strip())]
    no_number = not _numbers_given(messages, looked_up=False)  # no number at all, in digits or in words
    if clocks and no_number:
        out += clocks  # "奥斯陆明天几点日出？" → convert_time(time: "06:00"): the time asked after, made up
    everything = _conversation_text(messages)
    given = _all_stated(everything)
    if not chinese and not _AMOUNT_WORDS.search(everything):  # "给张三转账五百元", "half an hour": amounts unread
        out += [
            k
            for k in sorted(required & set(args))
            if k not in out and _a_round_guess(k, args[k], _spec(parameters, k), given)
        ]
    if not _ORDINAL_WORDS.search(everything):  # a date where nothing says when ("Get me tickets to see Toto.")
        out += [k for k in sorted(required & set(args)) if k not in out and _an_untold_date(args[k], everything, given)]
    written = _said_text(messages).lower()  # every turn's results: a token an earlier lookup gave is not made up
    out += [k for k in sorted(required & set(args)) if _names_a_file(k) and _unnamed_file(args[k], said, written)]
    formulas = [  # a date is no formula (:func:`_an_untold_date` judges it)
        k
        for k in sorted(required & set(args))
        if isinstance(args[k], str) and _FORMULA.fullmatch(args[k]) and not _A_DATE.fullmatch(args[k].strip())
    ]
    if formulas and not _numbers_given(messages):
        out += formulas  # "How many days are there in a leap year?" → expression "366"
    out += [k for k in sorted(required & set(args)) if _prose_for_a_formula(k, args[k], _spec(parameters, k))]
    out += [k for k in sorted(required & set(args)) if k not in out and _a_constant(k, args[k], _spec(parameters, k))]
    known = f"{written}\n{described}\n{json.dumps(parameters, ensure_ascii=False)}".lower()
    out += [k for k in sorted(args) if k not in out and _unknown_address(args[k], known)]
    out += [k for k in sorted(args) if k not in out and _untold_secret(k, args[k], written)]
    out += [k for k in sorted(required & set(args)) if k not in out and _placeholder(args[k], written)]
    out += [k for k in sorted(required & set(args)) if k not in out and _hollow(args[k], said)]
    lowered = everything.lower()
    out += [
        k for k in sorted(required & set(args)) if k not in out and _no_value(args[k], _spec(parameters, k), lowered)
    ]
    out += [k for k in both_ends(args) if k not in out]
    if not _EMPTIES.search(everything):  # "Empty my shopping cart", 清空购物车, "a new empty list": empty is asked
        out += [k for k in sorted(required & set(args)) if k not in out and _none_listed(k, args[k], said)]
    told = f"{everything}\n{known}"  # what an id may be written in: the conversation, the tool, the host
    out += [k for k in sorted(required & set(args)) if k not in out and _untold_id(k, args[k], told)]
    if chinese:
        return out  # a Chinese request's places and names come back in Latin script ("北京" → Asia/Shanghai)
    for key in sorted(required & set(args)):
        value, spec = args[key], _spec(parameters, key)
        if not isinstance(value, str) or spec.get("enum") or not _a_name(value):
            continue
        if _a_code(key, value, spec) and not _stands_for_nothing(value, said, everything):
            continue  # "Canadian dollars" as CAD: a code of something said in words
        if " ".join(value.lower().split()) in _NO_VALUE and _NEGATION.search(everything):
            continue  # "no special requests" → "None": the absence the user gave
        if _unsaid(value, said) and not _run_together(value, everything) and key not in out:  # a name always has
            out.append(key)  # words (:func:`_a_name`)
    return out


def _run_together(value: str, text: str) -> bool:
    """``value``'s letters and digits (six or more) are two or three words in a row of ``text`` run together:
    "McDonald's" for "order 5 fries from uber eats mc donalds" (BFCL live, a tuning case read for the first time,
    2026-12-07: the call had been dropped as a name nobody gave). Not a run that starts with a word any sentence
    holds (:data:`_FUNCTION_WORDS`): "my playlist" gives no ``MyPlaylist`` (a helper's review, 2026-12-07)."""
    joined = re.sub(r"[^0-9a-z]", "", value.lower())
    if len(joined) < 6:
        return False
    words = [re.sub(r"[^0-9a-z]", "", w.lower()) for w in text.split()]
    return any(
        words[i] not in _FUNCTION_WORDS  # "my sister" is no name: MySister stays made up
        and (
            "".join(words[i : i + n]) in (joined, joined.removesuffix("s"))
            or joined in ("".join(words[i : i + n]), "".join(words[i : i + n]).removesuffix("s"))
        )
        for n in (2, 3)
        for i in range(len(words) - n + 1)
    )


_SHORT_ISO_DATE = re.compile(r"(?<![\w-])(\d{4})-(\d{1,2})-(\d{1,2})(?=T\d|[^\w-]|$)")


def _iso_date(value: str) -> str:
    """Each ISO 8601 date the model wrote with one-digit month or day (``2023-10-1``, ``2024-5-05T09:00``) in the
    standard's two digits (``2023-10-01``): the form a tool's date parser takes. Anywhere in the string: "fetch news
    from 2023.10.1 to 2023.10.7" had become ``date_range: "2023-10-01 to 2023-10-7"`` (BFCL live, a tuning case read
    for the first time, 2026-12-07), when only a string's start was read. Only a real month and day."""

    def padded(match: re.Match[str]) -> str:
        year, month, day = match.group(1), int(match.group(2)), int(match.group(3))
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return match.group(0)
        return f"{year}-{month:02d}-{day:02d}"

    return _SHORT_ISO_DATE.sub(padded, value)


def tidy(value: Any) -> Any:
    """What the model wrote, without its tokenizer's traces: a one-line string's surrounding spaces
    (``" Christianity"``: the word's token carries its space) and a float's last-digit noise
    (``5.000000000000001`` → ``5.0``, 15 significant digits); an ISO date's one-digit month or day padded
    (:func:`_iso_date`); text over several lines is kept as written."""
    if isinstance(value, dict):
        return {k: tidy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tidy(v) for v in value]
    if isinstance(value, str) and "\n" not in value:
        return _iso_date(value.strip())
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.15g}")
    return value


def turn_start(messages: Sequence[MetonaMessage]) -> int:
    """Index of the first message after the last user message (the current turn's calls and results)."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return last_user + 1


def turn_calls(messages: Sequence[MetonaMessage]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls made since the last user message, in order."""
    return [(c.name, dict(c.args)) for m in messages[turn_start(messages) :] for c in m.tool_calls or ()]


def repeated(name: str, args: dict[str, Any], messages: Sequence[MetonaMessage]) -> bool:
    """The call is one the current turn has already made (same tool, same arguments)."""
    key = _canonical(args)
    return any(n == name and _canonical(a) == key for n, a in turn_calls(messages))


def _canonical(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=True, ensure_ascii=False)


def done_lines(messages: Sequence[MetonaMessage], *, indent: str = "") -> list[str]:
    """The current turn's results, one item each: ``- tool({arguments}) returned: result``, the result's further
    lines after ``indent`` (:data:`RESULT_INDENT` in the answer's prompt, none in the decision's)."""
    start = turn_start(messages)
    args = {c.id: c.args for m in messages[start:] for c in m.tool_calls or ()}
    lines = []
    for m in messages[start:]:
        if m.role == "tool":
            name = m.tool_result.tool_name if m.tool_result else "tool"
            call = args.get(m.tool_result.tool_call_id, {}) if m.tool_result else {}
            result = tool_text(m).replace("\n", "\n" + indent)
            lines.append(f"- {name}({json.dumps(call, ensure_ascii=False)}) returned: {result}")
    return lines


def with_results(text: str, messages: Sequence[MetonaMessage]) -> str:
    """``text`` followed by the current turn's successful results, the data it is about: a part of a request
    decided on its own (:func:`what_remains`). Shown as a "Done so far" list of calls, the 1.5B model wrote the
    calls into a formula (``sum(read_file(...))``)."""
    results = [
        tool_text(m)
        for m in messages[turn_start(messages) :]
        if m.role == "tool" and m.tool_result is not None and m.tool_result.success
    ]
    return "\n\n".join([text, *results])


def numbers_in(text: str) -> bool:
    """``text`` holds a number in digits."""
    return bool(re.search(r"\d", text))


def succeeded(messages: Sequence[MetonaMessage]) -> set[str]:
    """The tools whose calls in the current turn succeeded."""
    return {
        m.tool_result.tool_name
        for m in messages[turn_start(messages) :]
        if m.role == "tool" and m.tool_result is not None and m.tool_result.success
    }


def decision_history(messages: Sequence[MetonaMessage]) -> list[dict[str, Any]]:
    """The conversation for the decision: earlier turns as :func:`render_history`; the current turn's calls and
    results folded into its request as a "Done so far" list (shown its own call as an assistant message, the
    0.5B model wrote the same call again: 0 of 15 next decisions right)."""
    start = turn_start(messages)
    out = render_history(messages[:start])
    lines = done_lines(messages)
    if lines and out and out[-1]["role"] == "user":
        out[-1] = {"role": "user", "content": f"{out[-1]['content']}\n\n{DONE_SO_FAR}\n" + "\n".join(lines)}
    return out


def render_history(messages: Sequence[MetonaMessage]) -> list[dict[str, Any]]:
    """The conversation for the decision prompt: a tool call is the assistant's reply in the decision's own format
    (``{"tool": …, "arguments": …}``), a result a ``tool`` message (the chat template's tool response)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "content": tool_text(m)})
        elif m.role == "assistant" and m.tool_calls:
            calls = [json.dumps({"tool": c.name, "arguments": c.args}, ensure_ascii=False) for c in m.tool_calls]
            out.append({"role": "assistant", "content": "\n".join(calls)})
        else:
            out.append({"role": m.role, "content": m.content})
    return out
