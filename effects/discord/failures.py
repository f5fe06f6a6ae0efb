"""What the channel shows when a turn fails or a reply is cut, in the turn's locale.

A failed turn gets an error notice that says what failed in a user's words
(the model could not be reached, refused the key, took too long); the stream
error itself, with its URL and status, goes to the log only. A reply cut short
(a stop, a shutdown, a follow-up, the stale timeout, an error) gets a marker under its
last message, so nobody mistakes it for a whole answer. English is complete;
a missing locale or text falls back to it.
"""

from __future__ import annotations

import re

from toolloop.effects.ports import Notice
from toolloop.states import StreamError, TurnStatus

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "unreachable": "I could not reach the model, so I could not answer. Please try again "
        "in a moment.",
        "key_refused": "The model refused this bot's API key, so I could not answer. The "
        "bot's owner needs to check the key.",
        "too_slow": "The model took too long to answer, so I gave up on this reply.",
        "failed": "Something went wrong while the model answered, so I could not finish this "
        "reply.",
        "cut_stopped": "stopped",
        "cut_shutdown": "stopped: the bot shut down",
        "cut_follow_up": "interrupted by a new message",
        "cut_stale": "cut off: this reply took too long",
        "cut_failed": "cut off by an error",
    },
    "de": {
        "unreachable": "Ich konnte das Modell nicht erreichen und daher nicht antworten. Bitte "
        "versuch es gleich noch einmal.",
        "key_refused": "Das Modell hat den API-Schlüssel dieses Bots abgelehnt, daher konnte "
        "ich nicht antworten. Der Betreiber des Bots muss den Schlüssel prüfen.",
        "too_slow": "Das Modell hat zu lange gebraucht, daher habe ich diese Antwort abgebrochen.",
        "failed": "Beim Antworten des Modells ist etwas schiefgegangen, daher konnte ich diese "
        "Antwort nicht beenden.",
        "cut_stopped": "angehalten",
        "cut_shutdown": "angehalten: der Bot wurde beendet",
        "cut_follow_up": "durch eine neue Nachricht unterbrochen",
        "cut_stale": "abgebrochen: diese Antwort hat zu lange gedauert",
        "cut_failed": "durch einen Fehler abgebrochen",
    },
    "ja": {
        "unreachable": "モデルに接続できなかったため、回答できませんでした。"
        "少し待ってからもう一度お試しください。",
        "key_refused": "モデルがこのボットのAPIキーを拒否したため、回答できませんでした。"
        "ボットの管理者がキーを確認する必要があります。",
        "too_slow": "モデルの応答に時間がかかりすぎたため、この返信を中止しました。",
        "failed": "モデルの応答中に問題が発生したため、この返信を完了できませんでした。",
        "cut_stopped": "停止しました",
        "cut_shutdown": "停止しました：ボットが終了しました",
        "cut_follow_up": "新しいメッセージで中断されました",
        "cut_stale": "中断：この返信に時間がかかりすぎました",
        "cut_failed": "エラーで中断されました",
    },
}
UNREACHABLE = frozenset(
    {"ConnectError", "ConnectTimeout", "ReadError", "WriteError", "RemoteProtocolError"}
)
"""httpx's failures to reach the endpoint or keep the connection (the provider's error types)."""
TOO_SLOW = frozenset({"ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException"})
SHOWN_BY_THE_LOOP = frozenset({"timeout", "channel_send_failed"})
"""The inactivity timeout has the loop's own notice; a channel Discord refused takes none."""
KEY_REFUSED = re.compile(r"^HTTP 40[13] ")
"""The provider's `http_status` message for 401 Unauthorized and 403 Forbidden."""
CUTS = {
    TurnStatus.STOPPED_BY_USER: "cut_stopped",
    TurnStatus.FOLLOW_UP_INTERRUPT: "cut_follow_up",
    TurnStatus.ERROR: "cut_failed",
    TurnStatus.TIMEOUT: "cut_failed",
}
"""The marker of each way a turn can end mid-reply (a stale turn has `cut_stale`)."""


def text(key: str, locale: str) -> str:
    """`key`'s text in `locale`, else in English."""
    return TEXTS.get(locale, {}).get(key) or TEXTS["en"][key]


def failure_notice(error: StreamError | None, locale: str) -> Notice | None:
    """The error notice for a turn that ended with `error`, or None when none is due."""
    if error is not None and error.type in SHOWN_BY_THE_LOOP:
        return None
    key = "failed"
    if error is not None and error.type in UNREACHABLE:
        key = "unreachable"
    elif error is not None and error.type in TOO_SLOW:
        key = "too_slow"
    elif error is not None and error.type == "http_status" and KEY_REFUSED.match(error.message):
        key = "key_refused"
    return Notice(key=key, level="error", text=text(key, locale), hidden=False, iteration=0)


def cut_marker(status: TurnStatus | None, locale: str, *, shutdown: bool = False) -> str | None:
    """The marker for a reply that ended with `status` (None: the stale timeout cut it),
    or None when the reply was not cut; a stop by the bot's `shutdown` says so."""
    if status is None:
        return text("cut_stale", locale)
    if shutdown and status is TurnStatus.STOPPED_BY_USER:
        return text("cut_shutdown", locale)
    key = CUTS.get(status)
    return None if key is None else text(key, locale)
