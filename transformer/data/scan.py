"""SCAN (Lake and Baroni, 2018, "Generalization without systematicity"), generated here.

Commands in a small navigation language map to action sequences:

    jump twice after walk left    ->  LTURN WALK JUMP JUMP
    turn around right             ->  RTURN RTURN RTURN RTURN
    look opposite left thrice     ->  LTURN LTURN LOOK LTURN LTURN LOOK LTURN LTURN LOOK

The grammar (the paper's Figure 6, read as it is used in the released data):

    C -> S and S | S after S | S
    S -> V twice | V thrice | V
    V -> D opposite left | D opposite right | D around left | D around right | D left | D right | U
    D -> U | turn
    U -> walk | look | run | jump

and its interpretation: "x left" turns left then does x ("turn left" only turns), "x opposite
left" turns left twice first, "x around left" does (turn left, x) four times, "twice" and
"thrice" repeat, "x1 and x2" does x1 then x2, "x1 after x2" does x2 then x1.  That gives
20,910 distinct commands, the longest meaning 48 actions.

The splits are the paper's: "simple" (a random 80/20 split), "length" (train on commands
whose action sequence has at most 22 actions, test on the longer ones) and "jump" (the
primitive "jump" is seen in training only on its own; every other command containing
"jump" is in the test set).  As in the released data, the jump split's training set holds
the lone "jump" 1,467 times (14,670 training rows), so that the model sees it often.
"""

import dataclasses
import itertools

import numpy as np

from transformer.data.tasks import BOS, EOS, NUM_SPECIAL, PAD, Batch

PRIMITIVES = ("walk", "look", "run", "jump")
COMMAND_WORDS = PRIMITIVES + ("turn", "left", "right", "opposite", "around", "twice", "thrice", "and", "after")
ACTIONS = ("WALK", "LOOK", "RUN", "JUMP", "LTURN", "RTURN")
SPLITS = ("simple", "length", "jump")
LENGTH_SPLIT_MAX_ACTIONS = 22
JUMP_REPEATS = 1467


def _verb_phrases():
    """Every V, in grammar order (34 of them)."""
    doers = PRIMITIVES + ("turn",)
    phrases = [f"{d} {how} {side}" for how in ("opposite", "around") for d in doers for side in ("left", "right")]
    phrases += [f"{d} {side}" for d in doers for side in ("left", "right")]
    return phrases + list(PRIMITIVES)


def all_commands():
    """Every command of the grammar exactly once (20,910), in a fixed order."""
    singles = [f"{v}{times}" for v in _verb_phrases() for times in ("", " twice", " thrice")]   # 102
    pairs = [f"{a} {conj} {b}" for conj in ("and", "after") for a, b in itertools.product(singles, singles)]
    return singles + pairs


def interpret(command):
    """The action sequence (a list of ACTIONS) a command means; ValueError if it is not SCAN."""
    words = command.split()
    for conj in ("and", "after"):
        if conj in words:
            i = words.index(conj)
            first, second = _sentence(words[:i], command), _sentence(words[i + 1:], command)
            return first + second if conj == "and" else second + first
    return _sentence(words, command)


def _sentence(words, command):
    repeats = {"twice": 2, "thrice": 3}
    if words and words[-1] in repeats:
        return _verb(words[:-1], command) * repeats[words[-1]]
    return _verb(words, command)


def _verb(words, command):
    turn = {"left": ["LTURN"], "right": ["RTURN"]}
    if len(words) == 1 and words[0] in PRIMITIVES:
        return [words[0].upper()]
    if len(words) in (2, 3) and words[0] in PRIMITIVES + ("turn",) and words[-1] in turn:
        act = [] if words[0] == "turn" else [words[0].upper()]
        side = turn[words[-1]]
        if len(words) == 2:
            return side + act
        if words[1] == "opposite":
            return side + side + act
        if words[1] == "around":
            return (side + act) * 4
    raise ValueError(f"not a SCAN command: {command!r}")


def split(name, seed=0):
    """(train, test): lists of (command, actions) pairs for the split `name`.  Only the
    simple split is random (its shuffle uses `seed`); the others are fixed by definition."""
    if name not in SPLITS:
        raise ValueError(f"unknown SCAN split {name!r}; expected one of {SPLITS}")
    pairs = [(c, interpret(c)) for c in all_commands()]
    if name == "simple":
        order = np.random.default_rng(seed).permutation(len(pairs))
        cut = round(0.8 * len(pairs))
        return [pairs[i] for i in order[:cut]], [pairs[i] for i in order[cut:]]
    if name == "length":
        return ([p for p in pairs if len(p[1]) <= LENGTH_SPLIT_MAX_ACTIONS],
                [p for p in pairs if len(p[1]) > LENGTH_SPLIT_MAX_ACTIONS])
    has_jump = [p for p in pairs if "jump" in p[0].split()]
    train = [p for p in pairs if "jump" not in p[0].split()] + [("jump", ["JUMP"])] * JUMP_REPEATS
    return train, [p for p in has_jump if p[0] != "jump"]


# ----- token ids: the tasks module's PAD/BOS/EOS, then the words (or actions) in order -----

SRC_VOCAB = NUM_SPECIAL + len(COMMAND_WORDS)
TGT_VOCAB = NUM_SPECIAL + len(ACTIONS)
_WORD_ID = {w: NUM_SPECIAL + i for i, w in enumerate(COMMAND_WORDS)}
_ACTION_ID = {a: NUM_SPECIAL + i for i, a in enumerate(ACTIONS)}
MAX_COMMAND_WORDS = 9
MAX_ACTIONS = 48


def command_label(token):
    """A source token id as its word (PAD, BOS, EOS as _, <s>, </s>)."""
    return _label(token, COMMAND_WORDS)


def action_label(token):
    """A target token id as its action."""
    return _label(token, ACTIONS)


def _label(token, names):
    special = {PAD: "_", BOS: "<s>", EOS: "</s>"}
    return special.get(int(token), None) or names[int(token) - NUM_SPECIAL]


def to_batch(pairs):
    """Pairs -> a Batch: src (B, words) padded, tgt_in BOS + actions, tgt_out actions + EOS."""
    src_len = max(len(c.split()) for c, _ in pairs)
    tgt_len = max(len(a) for _, a in pairs) + 1
    src = np.full((len(pairs), src_len), PAD, dtype=np.int64)
    tgt = np.full((len(pairs), tgt_len + 1), PAD, dtype=np.int64)
    for i, (command, actions) in enumerate(pairs):
        words = command.split()
        src[i, :len(words)] = [_WORD_ID[w] for w in words]
        tgt[i, 0] = BOS
        tgt[i, 1:len(actions) + 1] = [_ACTION_ID[a] for a in actions]
        tgt[i, len(actions) + 1] = EOS
    return Batch(src, tgt[:, :-1], tgt[:, 1:])


@dataclasses.dataclass
class ScanBatches:
    """An endless stream of random training batches (drawn with replacement), from its own
    seeded generator `rng` (saved by checkpoints, so a resumed run continues it)."""
    pairs: list
    batch_size: int
    seed: int

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)

    def __iter__(self):
        return self

    def __next__(self):
        rows = self.rng.integers(0, len(self.pairs), size=self.batch_size)
        return to_batch([self.pairs[i] for i in rows])


class ScanTask:
    """A SCAN split as the training loop sees a data set (like tasks.ToyTask): training
    batches drawn from the training pairs, and for the progress lines a fixed sample of
    training commands, so that nothing about the test split guides training.  The test
    split is scored once, at the end (`test_batch`)."""

    src_vocab, tgt_vocab = SRC_VOCAB, TGT_VOCAB
    max_output_len = MAX_ACTIONS
    src_label, tgt_label = staticmethod(command_label), staticmethod(action_label)

    def __init__(self, split_name, seed=0):
        self.split_name = split_name
        self.train_pairs, self.test_pairs = split(split_name, seed)

    def stream(self, batch_size, seed):
        return ScanBatches(self.train_pairs, batch_size, seed)

    def heldout(self, size, seed):
        distinct = sorted(set((c, tuple(a)) for c, a in self.train_pairs))
        rows = np.random.default_rng(seed).choice(len(distinct), min(size, len(distinct)), replace=False)
        return to_batch([(distinct[i][0], list(distinct[i][1])) for i in rows])

    def test_batch(self):
        return to_batch(self.test_pairs)

    @staticmethod
    def encode_source(text):
        """A typed command ("jump twice") as source token ids; ValueError outside SCAN."""
        interpret(text)
        return to_batch([(text, [])]).src
