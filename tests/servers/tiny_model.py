"""Write tiny llama-architecture GGUF models whose greedy answer is fixed text.

The model is a bigram table. The vocabulary holds the special tokens, the 256
byte tokens of the SentencePiece byte fallback, the *pieces* of the answer and
every prefix of each piece (so that the tokenizer's merges can rebuild a piece
when the answer appears in a prompt). The hidden size equals the vocabulary
size, token embeddings are the identity, and attention and feed-forward
weights are zero: the residual stream then carries the current token alone,
and the output matrix alone decides the next token. It maps

* each answer piece to the next piece, and the last piece to ``<|im_end|>``
  (end of sequence);
* every other token (the prompt's last token, whatever the chat template put
  there) to the first piece,

so the greedy answer to any chat prompt is the concatenation of the pieces,
streamed one piece per token. The pieces must be distinct, because a token has
exactly one successor. A ChatML chat template is stored in the metadata.

A *branch* is a second-best successor (half the logit): never taken greedily,
but taken when a server's grammar forbids the first choice. That is how one
model makes a valid forced tool call under each server's grammar (``WEATHER``).
The tokenizer is SentencePiece ("llama") with byte fallback and no added space
prefix, so any prompt tokenizes and the answer tokenizes back to its pieces.

Usage: ``python -m tests.servers.tiny_model DIR`` writes every model of
``MODELS`` into DIR.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

# The ChatML template as Hugging Face ships it; llama-cpp-python recognises this
# exact string as its "chatml" chat format.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# ChatML with tools in the Hermes layout (Qwen2.5's template, without its
# default system prompt naming the model; kept in chatml_tools.jinja): tools
# are listed in the system message and a call is
# `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`.
# llama-server derives its tool-call parser and its `tool_choice` grammar from
# the template, so only a model carrying this one gets native tool calls there.
CHATML_TOOLS_TEMPLATE = (Path(__file__).parent / "chatml_tools.jinja").read_text().rstrip("\n")

SPIECE_SPACE = "\u2581"  # SentencePiece's visible space
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
UNK_ID, BOS_ID, EOS_ID, IM_START_ID, IM_END_ID = range(5)
# Logit of a successor: after RMS norm the residual is sqrt(n_embd) on one
# axis (about 20 here), so a successor's logit is about 40, a branch's about
# 20 and every other logit 0; sampling at any usual temperature stays greedy.
SUCCESSOR_WEIGHT = 2.0
BRANCH_WEIGHT = 1.0
HEADS = 2
PAD_TO = 64
FEED_FORWARD = 32


@dataclass(frozen=True)
class Branch:
    """A second-choice chain of pieces, taken only where a grammar forbids the first.

    ``after`` is the answer piece it branches from (its first piece is that
    piece's second-best successor, after the answer's own next piece or end
    of sequence); ``None`` branches from the prompt's end (every token that is
    no piece).
    """

    after: str | None
    pieces: tuple[str, ...]


@dataclass(frozen=True)
class TinyModel:
    """One generated model: its file stem, the pieces of its answer, its branches."""

    name: str
    pieces: tuple[str, ...]
    branches: tuple[Branch, ...] = ()
    template: str = CHATML_TEMPLATE

    @property
    def answer(self) -> str:
        """Return the full text the model answers with when nothing constrains it."""
        return "".join(self.pieces)

    @property
    def filename(self) -> str:
        """Return the GGUF file name of this model."""
        return f"{self.name}.gguf"


# Plain text with a multi-byte character (U+2615, three bytes in UTF-8).
PLAIN = TinyModel("tiny-plain", ("Tea", " is", " ready", " ☕", " enjoy", "."))
# A sentence of prose, then a verbatim tool call in an inline code span; the
# pieces split the span where a real tokenizer would: inside the name, the
# JSON and around the backticks.
VERBATIM = TinyModel(
    "tiny-verbatim",
    (
        "Let",
        " me",
        " check",
        " the",
        " weather.",
        " `get",
        "_weather",
        '({"',
        "city",
        '":',
        ' "',
        "Paris",
        '"})',
        "`",
    ),
)
# The native tool-call model, for both servers' grammars:
# * unconstrained (no tools, or `tool_choice` "auto"/"none") it answers the
#   text, so the model call after a tool result completes;
# * llama-server's `tool_choice: "required"` grammar allows text first but
#   forbids the end of sequence before a tool call, so after the text it takes
#   the branch that writes a Hermes tool call;
# * llama-cpp-python's grammar for a `tool_choice` naming the function is the
#   JSON of the function's parameters alone, which forbids the text's first
#   piece, so it takes the branch that writes the arguments piece by piece.
WEATHER_TEXT = ("Here", " is", " the", " weather.")
# `<tool_call>` stands alone: llama-server rejects a request whose grammar
# trigger word (`<tool_call>\n`) is one token that is not a preserved token.
WEATHER_HERMES_CALL = (
    "<tool_call>",
    '\n{"name": "get_weather", "arguments": ',
    '{"city": "Paris"}',
    "}\n</tool_call>",
)
WEATHER_ARGS = ('{"', "city", '":', ' "', "Paris", '"}')
WEATHER = TinyModel(
    "tiny-weather",
    WEATHER_TEXT,
    branches=(Branch(WEATHER_TEXT[-1], WEATHER_HERMES_CALL), Branch(None, WEATHER_ARGS)),
    template=CHATML_TOOLS_TEMPLATE,
)

MODELS: tuple[TinyModel, ...] = (PLAIN, VERBATIM, WEATHER)

# The tool these models are made for, in the OpenAI `tools` format.
GET_WEATHER_TOOL: dict[str, object] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _spm(text: str) -> str:
    return text.replace(" ", SPIECE_SPACE)


def _vocabulary(pieces: list[str]) -> tuple[list[str], list[float], list[int]]:
    """Return tokens, scores and types; ``pieces`` get consecutive ids after the bytes."""
    tokens = list(SPECIAL_TOKENS)
    types = [gguf.TokenType.UNKNOWN] + [gguf.TokenType.CONTROL] * (len(SPECIAL_TOKENS) - 1)
    scores = [0.0] * len(SPECIAL_TOKENS)
    for byte in range(256):
        tokens.append(f"<0x{byte:02X}>")
        types.append(gguf.TokenType.BYTE)
        scores.append(0.0)
    seen = set(tokens)
    for piece in pieces:
        text = _spm(piece)
        if text in seen:
            raise ValueError(f"piece {piece!r} occurs twice: a token has one successor")
        seen.add(text)
        tokens.append(text)
        types.append(gguf.TokenType.NORMAL)
        scores.append(0.0)
    # The prefixes the SentencePiece merges go through to rebuild each piece.
    for piece in pieces:
        text = _spm(piece)
        for end in range(2, len(text)):
            prefix = text[:end]
            if prefix not in seen:
                seen.add(prefix)
                tokens.append(prefix)
                types.append(gguf.TokenType.NORMAL)
                scores.append(-float(len(text) - end))
    while len(tokens) % PAD_TO:
        tokens.append(f"<unused{len(tokens)}>")
        types.append(gguf.TokenType.UNUSED)
        scores.append(-1000.0)
    return tokens, scores, [int(t) for t in types]


def _output_matrix(model: TinyModel, n_vocab: int) -> np.ndarray:
    """Return the bigram table as ``output.weight``: rows next token, columns current."""
    first = len(SPECIAL_TOKENS) + 256
    chains = [model.pieces, *(branch.pieces for branch in model.branches)]
    ids: list[list[int]] = []
    for chain in chains:
        ids.append(list(range(first, first + len(chain))))
        first += len(chain)
    piece_id = {
        piece: i
        for chain, chain_ids in zip(chains, ids, strict=True)
        for piece, i in zip(chain, chain_ids, strict=True)
    }
    in_chain = [i for chain_ids in ids for i in chain_ids]

    output = np.zeros((n_vocab, n_vocab), dtype=np.float32)
    output[ids[0][0], :] = SUCCESSOR_WEIGHT  # the prompt's end starts the answer
    for chain_ids in ids:
        for current, successor in zip(chain_ids, [*chain_ids[1:], IM_END_ID], strict=True):
            output[:, current] = 0.0
            output[successor, current] = SUCCESSOR_WEIGHT
    for branch, chain_ids in zip(model.branches, ids[1:], strict=True):
        if branch.after is None:
            columns = [i for i in range(n_vocab) if i not in in_chain]
            output[chain_ids[0], columns] = BRANCH_WEIGHT
        else:
            output[chain_ids[0], piece_id[branch.after]] = BRANCH_WEIGHT
    return output


def write_model(model: TinyModel, directory: Path) -> Path:
    """Write ``model`` as a GGUF file into ``directory`` and return its path."""
    pieces = [*model.pieces, *(p for branch in model.branches for p in branch.pieces)]
    tokens, scores, types = _vocabulary(pieces)
    n_vocab = len(tokens)

    path = directory / model.filename
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_name(model.name)
    writer.add_context_length(4096)
    writer.add_embedding_length(n_vocab)
    writer.add_block_count(1)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(n_vocab // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(UNK_ID)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(IM_END_ID)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    # The answer's first piece has no leading space, so none may be added.
    writer.add_add_space_prefix(False)
    writer.add_chat_template(model.template)

    zeros_square = np.zeros((n_vocab, n_vocab), dtype=np.float32)
    ones = np.ones(n_vocab, dtype=np.float32)
    writer.add_tensor("token_embd.weight", np.eye(n_vocab, dtype=np.float32))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", _output_matrix(model, n_vocab))
    writer.add_tensor("blk.0.attn_norm.weight", ones)
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        writer.add_tensor(f"blk.0.{name}.weight", zeros_square)
    writer.add_tensor("blk.0.ffn_norm.weight", ones)
    writer.add_tensor("blk.0.ffn_gate.weight", np.zeros((FEED_FORWARD, n_vocab), np.float32))
    writer.add_tensor("blk.0.ffn_up.weight", np.zeros((FEED_FORWARD, n_vocab), np.float32))
    writer.add_tensor("blk.0.ffn_down.weight", np.zeros((n_vocab, FEED_FORWARD), np.float32))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_all(directory: Path) -> dict[str, Path]:
    """Write every model of ``MODELS`` into ``directory``; map names to paths."""
    directory.mkdir(parents=True, exist_ok=True)
    return {model.name: write_model(model, directory) for model in MODELS}


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    for name, written in write_all(target).items():
        print(name, written)
