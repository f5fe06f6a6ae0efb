"""Tool calls that wait for a person, asked in the channel (SPEC 6c): Approve / Deny buttons.

`DiscordApprovals` is the bot's approval host. Each turn gets a port of its own
(`for_turn`), whose `ask` posts the request (the tool, its redacted arguments,
who asked) as a reply to the turn's trigger, with an Approve and a Deny button;
Deny opens a short modal for a reason the model reads. Only the user whose turn
it is, or a member with an approver role (`Access.may_approve`), may answer;
anyone else is refused, privately. Once decided, expired (the loop's
`TOOL_APPROVAL_TIMEOUT_MS`) or withdrawn (the turn was stopped) the buttons are
disabled and the message says the outcome.

The buttons are discord.py dynamic items (`ApprovalButton`) whose `custom_id`
carries the turn (its trigger's id), the call and a prefix of the arguments'
digest, so a bot that restarted still routes a press: to the turn when it runs
again (a resumed turn asks again under the same ids), and otherwise to a
private "this request expired" that also disables the dead buttons.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any

import anyio
import attrs
import discord

from toolloop.effects.discord.access import Access
from toolloop.effects.discord.writer import DeliveryError
from toolloop.effects.ports import KillSignal
from toolloop.states import ApprovalDecision, ApprovalRequest, Verdict

log = logging.getLogger("toolloop.discord")

DIGEST_SHOWN = 12
"""Hex digits of the arguments' digest a button carries: enough to tell stale arguments."""
CALL_KEY = re.compile(r"[A-Za-z0-9_.-]{1,48}")
"""A call id a `custom_id` carries as it is; any other is carried as its hash."""
TEMPLATE = re.compile(
    r"toolloop:(?P<verdict>approve|deny):(?P<turn>[0-9]{1,20}):"
    r"(?P<call>[A-Za-z0-9_.~-]{1,48}):(?P<digest>[0-9a-f]{12})"
)
"""An approval button's `custom_id` (at most 99 characters: Discord allows 100)."""
ARGS_SHOWN = 1000
"""Characters of the arguments' JSON the request shows; longer ones are cut."""
GRACE = 10.0
"""Seconds posting a request, or disabling an expired or withdrawn one's buttons, may take
(each finishes even when the turn is cancelled meanwhile)."""
REASON_MAX = 300
"""The longest reason the Deny modal takes."""
MODAL_TIMEOUT = 600.0
"""Seconds discord.py keeps listening for an opened Deny modal."""

EXPIRED = "This request expired."
NOT_YOURS = "Only the person who asked, or a member with an approver role, can answer this request."
TIMED_OUT = "Expired: nobody answered in time"
WITHDRAWN = "Withdrawn: the reply was stopped"
STALE = "Expired"


@attrs.frozen
class PromptKey:
    """What a button names: the turn (its trigger message), the call and the digest prefix."""

    turn: int
    call: str
    digest: str

    @classmethod
    def of(cls, turn: int, request: ApprovalRequest) -> PromptKey:
        return cls(turn, call_key(request.call_id), request.digest[:DIGEST_SHOWN])

    def custom_id(self, verdict: Verdict) -> str:
        return f"toolloop:{verdict.value}:{self.turn}:{self.call}:{self.digest}"


def call_key(call_id: str) -> str:
    """The call id as a `custom_id` carries it: as it is when short and plain, else hashed."""
    if CALL_KEY.fullmatch(call_id):
        return call_id
    return "~" + hashlib.sha256(call_id.encode()).hexdigest()[:24]


class ApprovalButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=TEMPLATE):
    """The Approve or the Deny button of one request; discord.py rebuilds it from a press's
    `custom_id`, so it answers after a restart once the client registered it
    (`DiscordApprovals.install`)."""

    def __init__(self, verdict: Verdict, key: PromptKey, *, disabled: bool = False) -> None:
        approve = verdict is Verdict.APPROVE
        super().__init__(
            discord.ui.Button(
                label="Approve" if approve else "Deny",
                style=discord.ButtonStyle.success if approve else discord.ButtonStyle.danger,
                custom_id=key.custom_id(verdict),
                disabled=disabled,
            )
        )
        self.verdict, self.key = verdict, key

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[discord.Client],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> ApprovalButton:
        key = PromptKey(int(match["turn"]), match["call"], match["digest"])
        return cls(Verdict(match["verdict"]), key)

    async def callback(self, interaction: discord.Interaction[discord.Client]) -> None:
        approvals = getattr(interaction.client, "approvals", None)
        if not isinstance(approvals, DiscordApprovals):
            log.warning("an approval button was pressed, but the client has no `approvals`")
            await interaction.response.send_message(EXPIRED, ephemeral=True)
            return
        await approvals.pressed(interaction, self.verdict, self.key)


class DenyReason(discord.ui.Modal):
    """The Deny button's modal: a short, optional reason the model reads."""

    reason: discord.ui.TextInput[DenyReason] = discord.ui.TextInput(
        label="Why? (the model reads this)",
        style=discord.TextStyle.paragraph,
        required=False,
        max_length=REASON_MAX,
    )

    def __init__(self, approvals: DiscordApprovals, key: PromptKey) -> None:
        super().__init__(
            title="Deny the tool call",
            custom_id=f"toolloop:reason:{key.turn}:{key.call}:{key.digest}",
            timeout=MODAL_TIMEOUT,
        )
        self.approvals, self.key = approvals, key

    async def on_submit(self, interaction: discord.Interaction[discord.Client]) -> None:
        await self.approvals.denied(interaction, self.key, self.reason.value)


@attrs.define
class _Prompt:
    """One request shown in a channel, until it is answered or retired."""

    key: PromptKey
    request: ApprovalRequest
    message: discord.Message | None = None
    outcome: str | None = None
    """What the message says happened; set once (whoever closes it first)."""
    decision: ApprovalDecision | None = None
    answered: anyio.Event = attrs.field(factory=anyio.Event)


class DiscordApprovals:
    """The bot's approval host: the requests shown in its channels and the presses on them."""

    def __init__(self, access: Access, *, mentions: discord.AllowedMentions | None = None) -> None:
        """`access.may_approve` says who may answer; `mentions` is the mention policy of the
        request messages (by default none pings)."""
        self.access = access
        self.mentions = mentions or discord.AllowedMentions.none()
        self._prompts: dict[tuple[int, str], _Prompt] = {}

    @staticmethod
    def install(client: discord.Client) -> None:
        """Listen for approval buttons, those of earlier runs included (call it in
        `setup_hook`); the client must hold this host as `client.approvals`."""
        client.add_dynamic_items(ApprovalButton)

    def for_turn(
        self, trigger: discord.Message | discord.PartialMessage, killed: KillSignal
    ) -> TurnApprovals:
        """The approval port of the turn answering `trigger` (its requests reply to it);
        `killed` is the turn's kill signal, which tells a withdrawn request from an expired one."""
        return TurnApprovals(self, trigger, killed)

    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The requests waiting for a person now, in the order asked."""
        return tuple(p.request for p in self._prompts.values() if p.outcome is None)

    async def pressed(
        self, interaction: discord.Interaction[discord.Client], verdict: Verdict, key: PromptKey
    ) -> None:
        """A press on a request's button: approve at once, or open the Deny modal."""
        prompt = await self._answerable(interaction, key)
        if prompt is None:
            return
        if verdict is Verdict.DENY:
            await interaction.response.send_modal(DenyReason(self, key))
            return
        by = interaction.user
        decision = ApprovalDecision(
            verdict=Verdict.APPROVE, digest=prompt.request.digest, by=str(by.id)
        )
        await self._decide(interaction, prompt, decision, f"Approved by {by.display_name}")

    async def denied(
        self, interaction: discord.Interaction[discord.Client], key: PromptKey, reason: str
    ) -> None:
        """The Deny modal was submitted, with or without a reason."""
        prompt = await self._answerable(interaction, key)
        if prompt is None:
            return
        by, why = interaction.user, reason.strip() or None
        decision = ApprovalDecision(
            verdict=Verdict.DENY, digest=prompt.request.digest, reason=why, by=str(by.id)
        )
        outcome = f"Denied by {by.display_name}" + (f": {why}" if why else "")
        await self._decide(interaction, prompt, decision, outcome)

    async def _answerable(
        self, interaction: discord.Interaction[discord.Client], key: PromptKey
    ) -> _Prompt | None:
        """The open request a press names, once its presser may answer it; otherwise the
        presser is told why (privately) and None."""
        prompt = self._prompts.get((key.turn, key.call))
        if prompt is None or prompt.key != key or prompt.outcome is not None:
            await self._expired(interaction, key)
            return None
        requester = int(prompt.request.user_id) if prompt.request.user_id.isdigit() else 0
        if not self.access.may_approve(interaction.user, requester):
            await interaction.response.send_message(NOT_YOURS, ephemeral=True)
            return None
        return prompt

    async def _decide(
        self,
        interaction: discord.Interaction[discord.Client],
        prompt: _Prompt,
        decision: ApprovalDecision,
        outcome: str,
    ) -> None:
        """Hand the decision to the waiting turn, and show it on the request's message."""
        prompt.outcome, prompt.decision = outcome, decision
        prompt.answered.set()
        try:
            await interaction.response.edit_message(
                embed=request_embed(prompt.request, outcome), view=closed(prompt.key)
            )
            pressed_on = interaction.message.id if interaction.message is not None else None
            if prompt.message is not None and prompt.message.id != pressed_on:
                await self._show(prompt)  # a button of the request's earlier message
        except discord.HTTPException as error:
            log.warning("Discord refused to show the decision on %s: HTTP %s", prompt.key, error)

    async def _expired(
        self, interaction: discord.Interaction[discord.Client], key: PromptKey
    ) -> None:
        """A press on a request no turn waits for (decided, retired, or from before a
        restart): say so privately, and disable the buttons it was pressed on if they are
        still live (a request of an earlier run)."""
        await interaction.response.send_message(EXPIRED, ephemeral=True)
        message = interaction.message
        if message is None or not live(message):  # already closed: it says how
            return
        embed = message.embeds[0] if message.embeds else discord.Embed()
        try:
            await message.edit(embed=embed.set_footer(text=STALE), view=closed(key))
        except discord.HTTPException as error:
            log.warning("Discord refused to disable the expired request %s: %s", key, error)

    async def ask(self, port: TurnApprovals, request: ApprovalRequest) -> ApprovalDecision:
        """Post the request and wait for its decision; cancelled (the loop's timeout, a
        kill), its buttons are disabled with the outcome before the cancellation goes on."""
        prompt = _Prompt(PromptKey.of(port.trigger.id, request), request)
        self._prompts[(prompt.key.turn, prompt.key.call)] = prompt
        try:
            # shielded: a request Discord shows is known here, so it is always retired
            with anyio.CancelScope(shield=True), anyio.fail_after(GRACE):
                prompt.message = await self._post(port.trigger, prompt)
            await prompt.answered.wait()
            assert prompt.decision is not None
            return prompt.decision
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(GRACE):
                await self.retire(prompt, WITHDRAWN if port.killed.is_set() else TIMED_OUT)
            raise
        finally:
            if self._prompts.get((prompt.key.turn, prompt.key.call)) is prompt:
                del self._prompts[(prompt.key.turn, prompt.key.call)]

    async def _post(
        self, trigger: discord.Message | discord.PartialMessage, prompt: _Prompt
    ) -> discord.Message:
        """The request as a reply to `trigger`; a refusal is logged with the channel and
        raised as `DeliveryError` (the turn fails: nobody could ever answer it)."""
        try:
            return await trigger.channel.send(
                embed=request_embed(prompt.request, None),
                view=opened(prompt.key),
                reference=trigger.to_reference(fail_if_not_exists=False),
                allowed_mentions=self.mentions,
            )
        except discord.HTTPException as error:
            what = f"approval request for {prompt.request.tool}"
            failure = DeliveryError(trigger.channel.id, what, error)
            log.warning("%s", failure)
            raise failure from error

    async def withdraw(self, port: TurnApprovals, request: ApprovalRequest) -> None:
        """The turn was stopped while the request waited: disable its buttons."""
        key = PromptKey.of(port.trigger.id, request)
        prompt = self._prompts.get((key.turn, key.call))
        if prompt is not None and prompt.key == key:
            await self.retire(prompt, WITHDRAWN)

    async def retire(self, prompt: _Prompt, outcome: str) -> None:
        """Close an unanswered request with `outcome` (once: the first to close it wins)."""
        if prompt.outcome is not None:
            return
        prompt.outcome = outcome
        if prompt.message is not None:
            await self._show(prompt)

    async def _show(self, prompt: _Prompt) -> None:
        """Edit the request's message to its outcome, its buttons disabled."""
        assert prompt.message is not None
        try:
            await prompt.message.edit(
                embed=request_embed(prompt.request, prompt.outcome), view=closed(prompt.key)
            )
        except discord.HTTPException as error:
            log.warning("Discord refused to close the approval request %s: %s", prompt.key, error)


@attrs.frozen
class TurnApprovals:
    """The approval port (`toolloop.ports.ApprovalPort`) of one turn of the bot."""

    host: DiscordApprovals
    trigger: discord.Message | discord.PartialMessage
    """The message the turn answers: its id names the turn in the buttons (partial for a
    turn resumed from the journal)."""
    killed: KillSignal

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        return await self.host.ask(self, request)

    async def withdraw(self, request: ApprovalRequest) -> None:
        await self.host.withdraw(self, request)


def request_embed(request: ApprovalRequest, outcome: str | None) -> discord.Embed:
    """The request as the channel shows it: the tool, its (redacted) arguments, who asked,
    and, once closed, the outcome."""
    shown = json.dumps(request.args or {}, indent=2, ensure_ascii=False)
    if len(shown) > ARGS_SHOWN:
        shown = shown[:ARGS_SHOWN] + "\n…"
    embed = discord.Embed(
        title=f"Run {request.tool}?",
        description="```json\n" + shown.replace("```", "`\u200b``") + "\n```",
        colour=discord.Colour.gold() if outcome is None else discord.Colour.light_grey(),
    )
    embed.add_field(name="Asked by", value=f"<@{request.user_id}>")
    if outcome is not None:
        embed.set_footer(text=outcome)
    return embed


def live(message: discord.Message) -> bool:
    """The message still has a button one can press."""
    rows = [c for c in message.components if isinstance(c, discord.ActionRow)]
    return any(
        isinstance(item, discord.Button) and not item.disabled
        for row in rows
        for item in row.children
    )


def opened(key: PromptKey) -> discord.ui.View:
    """The request's two live buttons."""
    return _buttons(key, disabled=False)


def closed(key: PromptKey) -> discord.ui.View:
    """The request's two buttons, disabled."""
    return _buttons(key, disabled=True)


def _buttons(key: PromptKey, *, disabled: bool) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(ApprovalButton(Verdict.APPROVE, key, disabled=disabled))
    view.add_item(ApprovalButton(Verdict.DENY, key, disabled=disabled))
    return view
