"""A discord.py bot on toolloop: a bot author brings a provider, tools and a persona.

`ToolloopBot` answers the messages its access policy admits (by default those
that mention it or reply to it, and direct messages: `access.Access`) through
the `TurnManager` (one turn per channel at a time), speaks through `DiscordChannel`
(one message per stream, the persona's webhook when one is configured), offers
`/kill` as a slash command, asks in the channel before a tool that requires
approval runs (`approvals`), and gives the model as its context either a short
transcript it keeps per channel or the reply chain read from Discord
(`BotSettings.conversation`, `chain`). `BotSettings.from_env` reads its
configuration. With a journal (`BotSettings.journal`, or `journal=`), every
turn is journaled (`toolloop.effects.durable`), and on start the turns a dead
process left unfinished are resumed, each continuing its Discord message.
"""

from __future__ import annotations

import functools
import itertools
import logging
import time
from collections.abc import Callable

import attrs
import discord
from discord import app_commands

from toolloop.effects.discord.adapter import DiscordChannel
from toolloop.effects.discord.approvals import DiscordApprovals
from toolloop.effects.discord.batch import BatchLines
from toolloop.effects.discord.chain import reply_chain
from toolloop.effects.discord.messages import image_urls, read_message, thread_opener
from toolloop.effects.discord.rate import Clock, EditWindow
from toolloop.effects.discord.settings import BotSettings
from toolloop.effects.discord.turns import (
    TurnManager,
    TurnRequest,
    as_delivered,
    from_a_user,
)
from toolloop.effects.discord.voices import DiscordPersona, Place, Voice, WebhookVoice, no_pings
from toolloop.effects.durable.journal import Journal, JournaledTurn
from toolloop.effects.durable.resume import TurnPorts, end_stale, resume_turn, run_journaled
from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.observe import HostEvent, HostObserver
from toolloop.effects.ports import Provider, ToolRegistryPort
from toolloop.effects.registry.stash import ContextStash
from toolloop.effects.turn import Attempt, prepared, run_generation_turn, wants_verbatim
from toolloop.states import ContextItem, GenerationTurnResult, Persona, Sticker, TurnSettings

log = logging.getLogger("toolloop.discord")
WEBHOOK_NAME = "toolloop"
TRANSCRIPT = 40
"""How many recent messages of a channel the model sees."""
SYSTEM = (
    "You are {name}, a helpful assistant in a Discord channel. Use your tools when a "
    "question needs them; never guess a calculation or the time. Answer concisely."
)


@attrs.frozen(kw_only=True)
class ChannelEvent:
    """A host event of a turn (`toolloop.effects.observe`) and the channel of the turn."""

    channel_id: int
    event: HostEvent


ChannelObserver = Callable[[ChannelEvent], None]


class ToolloopBot(discord.Client):
    """A Discord bot whose every channel turn runs the tool loop."""

    def __init__(
        self,
        settings: BotSettings,
        *,
        provider: Provider,
        registry: ToolRegistryPort,
        clock: Clock | None = None,
        intents: discord.Intents | None = None,
        on_event: ChannelObserver | None = None,
        mentions: discord.AllowedMentions | None = None,
        journal: Journal | None = None,
    ) -> None:
        """`on_event` sees every turn's host events (streams, tools, notices) with the
        channel they happened in (`ChannelEvent`), e.g. to log them or keep a status line.

        `mentions` is the mention policy of everything the bot sends; by default
        (`no_pings`) the model's text pings no one but, with the setting
        `ping_replied_user`, the author of the message a reply answers.

        `journal` (an open `toolloop.durable.Journal`) journals every turn; without
        one, `settings.journal` is opened on start (`setup_hook`).
        """
        if intents is None:
            intents = discord.Intents.default()
            intents.message_content = True
        if mentions is None:
            mentions = no_pings(replied_user=settings.ping_replied_user)
        super().__init__(intents=intents, allowed_mentions=mentions)
        self.mentions = mentions
        self.settings, self.provider, self.registry = settings, provider, registry
        self.clock, self.on_event = clock, on_event
        self.journal = journal
        self._own_journal: Journal | None = None
        """The journal `setup_hook` opened, which `close` closes."""
        self.tree = app_commands.CommandTree(self)
        self.turns = TurnManager(
            self.respond,
            self.open_channel,
            stop_phrase=settings.stop_phrase,
            stale_after=settings.stale_turn_seconds,
            locale=settings.locale,
            may_stop=settings.access.may_stop,
        )
        self.approvals = DiscordApprovals(settings.access, mentions=mentions)
        """Where the calls of tools registered with `requires_approval` are asked about."""
        self.transcripts: dict[int, list[ContextItem]] = {}
        """Each channel's recent messages, oldest first (cut to `TRANSCRIPT` after each turn)."""
        self._windows: dict[int, EditWindow] = {}
        self._voices: dict[int, Voice | None] = {}
        self.tree.command(name="kill", description="Stop the bot's reply in this channel")(
            self._kill_command
        )

    async def setup_hook(self) -> None:
        """Listen for approval buttons, an earlier run's too; open the journal
        (`settings.journal`), register `/kill` with Discord (`sync_commands`) and resume
        the turns the journal holds (`resume_turns`)."""
        self.approvals.install(self)
        if self.journal is None and self.settings.journal is not None:
            self.journal = self._own_journal = await Journal.open(self.settings.journal)
        await sync_commands(self.tree)
        await self.resume_turns()

    async def resume_turns(self) -> list[str]:
        """Resume the turns an earlier process left unfinished in the journal, each in its
        channel's lane, before what arrives there meanwhile; one older than
        `stale_turn_seconds` ends with the `turn_interrupted` notice instead, and one
        whose channel is gone is let go. The keys of the turns resumed."""
        if self.journal is None:
            return []
        resumed = []
        for journaled in await self.journal.unfinished():
            try:
                place = await self._place(int(journaled.turn.channel_id or 0))
            except (discord.HTTPException, discord.InvalidData) as error:
                log.warning(
                    "turn %s is not resumed: its channel is gone (%s)", journaled.key, error
                )
                await self.journal.finish(journaled.key)
                continue
            if time.time() - journaled.started_at > self.settings.stale_turn_seconds:
                async with await self.open_channel(place) as channel:
                    ports = self._ports(channel, MemoryTurnControl(), None, None)
                    await end_stale(self.journal, journaled, ports)
                continue
            self.turns.resume(place, journaled)
            resumed.append(journaled.key)
        return resumed

    async def _place(self, channel_id: int) -> Place:
        found = self.get_channel(channel_id) or await self.fetch_channel(channel_id)
        if not isinstance(found, discord.TextChannel | discord.Thread | discord.DMChannel):
            raise discord.InvalidData(f"channel {channel_id} is not a text channel")
        return found

    async def on_message(self, message: discord.Message) -> None:
        """Nothing once the bot is closing. A stop phrase stops (never reaching the
        transcript); a message the access policy answers starts a turn, and goes to the
        transcript as the model reads it (`read`), after the message its thread was started
        from when it opens the thread's transcript (with `conversation = "reply_chain"`
        Discord holds it instead)."""
        if self.turns.closing or not from_a_user(message):
            return
        if self.turns.is_stop_phrase(message):
            await self.turns.on_message(message)
            return
        me = self.user.id if self.user is not None else 0
        if not self.settings.access.answers(message, me, self.webhook_ids()):
            return
        said = await self.read(message, me)
        if not (said.content or said.images):  # nothing to answer: never an empty prompt
            return
        if self.settings.conversation == "reply_chain":
            await self.turns.on_message(message)
            return
        transcript = self._transcript(message.channel.id)
        if not transcript and isinstance(message.channel, discord.Thread):
            opener = await thread_opener(message.channel)
            if opener is not None and opener.id != message.id:
                transcript.append(await self.read(opener, me))
        transcript.append(said)
        await self.turns.on_message(message)

    async def read(self, message: discord.Message, me: int) -> ContextItem:
        """A user's message as the model reads it: its images sent as images when the
        provider accepts them (`messages.image_urls`), named like any file otherwise."""
        images = image_urls(message) if self.provider.descriptor.accepts_images else ()
        text = await read_message(message, me, sent=images)
        return ContextItem(author=message.author.display_name, content=text, images=images)

    async def read_chain(self, batch: tuple[discord.Message, ...]) -> list[ContextItem]:
        """The reply chain the batch's last message ends, read from Discord (`chain`), the
        batch's other messages before that message, at most `reply_chain_messages` in all;
        the bot's consecutive messages (one reply cut into several) are joined."""
        limit = self.settings.reply_chain_messages
        chain = await reply_chain(batch[-1], limit=limit, mine=self.is_mine)
        seen = {message.id for message in chain}
        others = [message for message in batch[:-1] if message.id not in seen]
        messages = [*chain[:-1], *others, batch[-1]][-limit:]
        me = self.user.id if self.user is not None else 0
        items = []
        for mine, run in itertools.groupby(messages, key=self.is_mine):
            if mine:
                text = "\n".join(m.content for m in run if m.content)
                items += [ContextItem(author=self.speaker, content=text)] if text else []
                continue
            for message in run:
                item = await self.read(message, me)
                items += [item] if item.content or item.images else []
        return items

    def is_mine(self, message: discord.Message) -> bool:
        """The bot's own message, or its persona webhook's."""
        me = self.user.id if self.user is not None else None
        return message.author.id == me or message.webhook_id in self.webhook_ids()

    def webhook_ids(self) -> set[int]:
        """The persona's webhooks: a reply to one of their messages is a reply to the bot."""
        return {v.webhook.id for v in self._voices.values() if isinstance(v, WebhookVoice)}

    def kill_reply(self, channel_id: int, user: discord.abc.User | None = None) -> str:
        """What `/kill` by `user` does in a channel and says about it: only the people who
        asked for the reply and moderators may stop it (`Access.may_stop`)."""
        if user is not None and not self.turns.may_stop(channel_id, user):
            return "Only the person who asked, or a moderator, can stop this reply."
        return "Stopped." if self.turns.kill(channel_id) else "Nothing to stop here."

    async def _kill_command(self, interaction: discord.Interaction) -> None:
        reply = self.kill_reply(interaction.channel_id or 0, interaction.user)
        await interaction.response.send_message(
            reply, ephemeral=True, allowed_mentions=self.mentions
        )

    async def close(self) -> None:
        """Take no new message; stop the running turns (as `/kill` does, within
        `shutdown_grace_seconds`) and their messages' editors, then disconnect. With a
        journal, leave them to it instead (`TurnManager.suspend`): the next start resumes
        them. `toolloop discord` calls this on SIGTERM and SIGINT (`shutdown`)."""
        if self.journal is not None:  # the next start resumes the running turns
            await self.turns.suspend()
        else:
            await self.turns.close(self.settings.shutdown_grace_seconds)
        if self._own_journal is not None:
            journal, self._own_journal = self._own_journal, None
            await journal.close()  # the one `setup_hook` opened
        await super().close()

    # -- one turn --------------------------------------------------------------------------

    async def open_channel(self, place: Place) -> DiscordChannel:
        """The Channel port of one turn in `place`."""
        thought_log = None
        if self.settings.thought_log_channel is not None:
            found = self.get_channel(self.settings.thought_log_channel)
            thought_log = found if isinstance(found, discord.abc.Messageable) else None
        return DiscordChannel(
            place,
            window=self._windows.setdefault(place.id, EditWindow()),
            persona=await self.persona_voice(place),
            thought_log=thought_log,
            clock=self.clock,
            mentions=self.mentions,
        )

    async def persona_voice(self, place: Place) -> Voice | None:
        """The persona's webhook in `place` (made once); None without a persona or permission."""
        persona = self.settings.persona
        if persona is None or isinstance(place, discord.DMChannel):
            return None
        if place.id not in self._voices:
            self._voices[place.id] = await self._webhook_voice(place, persona)
        return self._voices[place.id]

    async def _webhook_voice(
        self, place: discord.TextChannel | discord.Thread, persona: DiscordPersona
    ) -> Voice | None:
        parent = place.parent if isinstance(place, discord.Thread) else place
        if not isinstance(parent, discord.TextChannel):
            return None
        try:
            hooks = [h for h in await parent.webhooks() if h.name == WEBHOOK_NAME]
            hook = hooks[0] if hooks else await parent.create_webhook(name=WEBHOOK_NAME)
        except discord.HTTPException as error:
            log.warning(
                "no webhook in channel %s (HTTP %s): the persona speaks as the bot",
                parent.id,
                error.status,
            )
            return None
        thread = place if isinstance(place, discord.Thread) else None
        return WebhookVoice(hook, persona, thread)

    async def respond(self, request: TurnRequest) -> GenerationTurnResult:
        """Run the generation turn for the batch on its conversation (`conversation`), or
        carry on the resumed one, and remember what the persona said in the transcript
        (Discord holds a reply chain)."""
        place_id = request.channel.channel_id
        chained = self.settings.conversation == "reply_chain"
        transcript = self._transcript(place_id)
        answered = len(transcript)
        # the messages after `answered` arrived during the turn: its reply goes before them
        # (the transcript is cut to `TRANSCRIPT` only here, after the reply went in, so
        # `answered` still points where it did)
        name = self.speaker
        async with BatchLines(request.channel) as lines:
            if request.resumed is not None:
                result = await self._resume_turn(request, request.resumed, lines)
            else:
                if chained:
                    conversation = await self.read_chain(request.messages)
                else:
                    conversation = transcript[-TRANSCRIPT:]
                result = await self._run_turn(request, conversation, lines)
        result = await as_delivered(result, request.channel)  # only what Discord holds
        if chained:  # Discord holds the conversation
            return result
        said = [ContextItem(author=name, content=r.text) for r in result.persona_responses]
        transcript[answered:answered] = said
        del transcript[:-TRANSCRIPT]
        return result

    async def _run_turn(
        self, request: TurnRequest, conversation: list[ContextItem], lines: BatchLines
    ) -> GenerationTurnResult:
        """The generation turn on `conversation`, journaled under its channel and trigger when
        there is a journal; its batches shown by `lines`."""
        place_id, trigger = request.channel.channel_id, request.messages[-1]
        name, guild = self.speaker, trigger.guild
        turn = TurnSettings(
            locale=self.settings.locale,
            persona=Persona(name=name),
            context=(
                ContextItem(kind="system", content=SYSTEM.format(name=name)),
                *conversation,
            ),
            channel_id=str(place_id),
            direct_message=isinstance(request.channel.place, discord.DMChannel),
            user_id=str(trigger.author.id),
            guild_id=str(guild.id) if guild is not None else None,
            guild_stickers=tuple(
                Sticker(id=str(s.id), name=s.name) for s in (guild.stickers if guild else ())
            ),
        )
        attempt, on_event = Attempt(provider=self.provider), self._observer(place_id, lines)
        if self.journal is not None:
            turn, config, verbatim = prepared(turn, attempt, self.registry)
            ports = self._ports(request.channel, request.control, trigger, on_event, verbatim)
            key = f"{place_id}/{trigger.id}"
            return await run_journaled(self.journal, key, turn=turn, config=config, ports=ports)
        return await run_generation_turn(
            turn=turn,
            attempts=[attempt],
            registry=self.registry,
            channel=request.channel,
            control=request.control,
            approvals=self.approvals.for_turn(trigger, request.control.killed),
            reply_to=str(trigger.id),
            on_event=on_event,
        )

    async def _resume_turn(
        self, request: TurnRequest, journaled: JournaledTurn, lines: BatchLines
    ) -> GenerationTurnResult:
        """An earlier process's unfinished turn, carried on from the journal."""
        assert self.journal is not None, "a resumed turn comes from the journal"
        verbatim = wants_verbatim(Attempt(provider=self.provider), self.registry)
        answered, trigger = journaled.reply_to, None
        if answered is not None and answered.isdigit():
            trigger = request.channel.place.get_partial_message(int(answered))
        on_event = self._observer(request.channel.channel_id, lines)
        ports = self._ports(request.channel, request.control, trigger, on_event, verbatim)
        return await resume_turn(self.journal, journaled, ports)

    def _ports(
        self,
        channel: DiscordChannel,
        control: MemoryTurnControl,
        trigger: discord.Message | discord.PartialMessage | None,
        on_event: HostObserver | None,
        verbatim: bool = False,
    ) -> TurnPorts:
        """A journaled turn's ports in `channel`, answering `trigger` (its requests for
        approval reply to it)."""
        return TurnPorts(
            provider=self.provider,
            registry=self.registry,
            channel=channel,
            control=control,
            stash=ContextStash(),
            reply_to=None if trigger is None else str(trigger.id),
            verbatim=verbatim,
            on_event=on_event,
            approvals=None if trigger is None else self.approvals.for_turn(trigger, control.killed),
        )

    def _observer(self, channel_id: int, lines: BatchLines) -> HostObserver:
        return functools.partial(self._seen, channel_id, lines)

    def _seen(self, channel_id: int, lines: BatchLines, event: HostEvent) -> None:
        lines.seen(event)
        if self.on_event is not None:
            self.on_event(ChannelEvent(channel_id=channel_id, event=event))

    @property
    def speaker(self) -> str:
        """Whom the model speaks as: the persona, or the bot's user."""
        if self.settings.persona is not None:
            return self.settings.persona.name
        return self.user.name if self.user is not None else "toolloop"

    def _transcript(self, place_id: int) -> list[ContextItem]:
        return self.transcripts.setdefault(place_id, [])


async def sync_commands(tree: app_commands.CommandTree[discord.Client]) -> bool:
    """Sync the global slash commands only when Discord's differ from the tree's (a name
    or a description): a bulk sync on every start counts against a tight daily limit.
    True when a sync was needed."""
    remote = {(command.name, command.description) for command in await tree.fetch_commands()}
    local = {(c.name, getattr(c, "description", "")) for c in tree.get_commands()}
    if remote == local:
        return False
    await tree.sync()
    log.info("synced the slash commands with Discord: %s", sorted(name for name, _ in local))
    return True
