"""Who the bot answers and who may stop a reply.

By default the bot answers a message that mentions it or replies to it, and
direct messages; `answer_all` or `answer_channels` widen that. Allow-lists
narrow who and where (an empty list allows everyone, everywhere; a user on the
user list or with a role on the role list is allowed), block-lists always win.
A thread counts as its own channel and as its parent. In a direct message only
the DM switch and the user lists apply (a user has no roles there). A reply may
be stopped by the people who asked for it and by moderators: members with a
moderator role or with Manage Messages in the channel. A tool call waiting for
approval (SPEC 6c) may be answered by the user whose turn it is and by members
with an approver role.
"""

from __future__ import annotations

from collections.abc import Collection

import attrs
import discord

from toolloop.effects.discord.voices import Place

Ids = frozenset[int]


@attrs.frozen(kw_only=True)
class Access:
    """The answer policy, the allow- and block-lists, and who moderates."""

    answer_all: bool = False
    """Answer every message the bot can read, not only those addressed to it."""
    answer_channels: Ids = frozenset()
    """Channels (a thread's parent counts) where every message is answered."""
    direct_messages: bool = True
    """Answer direct messages."""
    allow_users: Ids = frozenset()
    block_users: Ids = frozenset()
    allow_roles: Ids = frozenset()
    block_roles: Ids = frozenset()
    allow_channels: Ids = frozenset()
    block_channels: Ids = frozenset()
    moderator_roles: Ids = frozenset()
    """Members with one of these roles may stop anyone's reply."""
    approver_roles: Ids = frozenset()
    """Members with one of these roles may approve or deny anyone's tool call."""

    def answers(self, message: discord.Message, me: int, own: Collection[int] = ()) -> bool:
        """The bot answers `message`: it is addressed to the bot (`me`, or one of its `own`
        webhooks replied to) or in a channel answered in full, and its author and place
        are allowed."""
        return self.admits(message) and (
            self.answer_all or self._answered_here(message) or addressed(message, me, own)
        )

    def admits(self, message: discord.Message) -> bool:
        """The lists allow the message's author (by user or by role) and place."""
        author = message.author.id
        if isinstance(message.channel, discord.DMChannel):
            return self.direct_messages and _listed({author}, self.allow_users, self.block_users)
        roles = {role.id for role in getattr(message.author, "roles", ())}
        allowed = (
            not (self.allow_users or self.allow_roles)
            or author in self.allow_users
            or bool(roles & self.allow_roles)
        )
        blocked = author in self.block_users or bool(roles & self.block_roles)
        where = _listed(_places(message.channel), self.allow_channels, self.block_channels)
        return allowed and not blocked and where

    def may_stop(self, user: discord.abc.User, place: Place, requesters: Collection[int]) -> bool:
        """`user` may stop the reply in `place` that `requesters` asked for."""
        if user.id in requesters:
            return True
        if not isinstance(user, discord.Member) or isinstance(place, discord.DMChannel):
            return False
        moderator = any(role.id in self.moderator_roles for role in user.roles)
        return moderator or place.permissions_for(user).manage_messages

    def may_approve(self, user: discord.abc.User, requester: int) -> bool:
        """`user` may answer a tool call's approval request in the turn `requester` asked for:
        they are that user, or a member with an approver role (none in a direct message)."""
        if user.id == requester:
            return True
        roles = user.roles if isinstance(user, discord.Member) else ()
        return any(role.id in self.approver_roles for role in roles)

    def _answered_here(self, message: discord.Message) -> bool:
        return bool(_places(message.channel) & self.answer_channels) or (
            isinstance(message.channel, discord.DMChannel) and self.direct_messages
        )


def addressed(message: discord.Message, me: int, own: Collection[int] = ()) -> bool:
    """`message` mentions the bot, or replies to the bot's message or its own webhook's."""
    if any(user.id == me for user in message.mentions):
        return True
    replied = message.reference.resolved if message.reference is not None else None
    if not isinstance(replied, discord.Message):
        return False
    return replied.author.id == me or (replied.webhook_id is not None and replied.webhook_id in own)


def _places(channel: object) -> set[int]:
    """The channel's id, and its parent's for a thread."""
    ids = {getattr(channel, "id", 0)}
    parent = getattr(channel, "parent_id", None)
    return ids | {parent} if isinstance(parent, int) else ids


def _listed(ids: Collection[int], allowed: Ids, blocked: Ids) -> bool:
    """None of `ids` blocked, and one of them allowed when there is an allow-list."""
    return not blocked.intersection(ids) and (not allowed or bool(allowed.intersection(ids)))
