"""Multi-turn sessions: scripts from dataset items, history with the model's own answers,
conversations handed from user to user, and a failed turn ending its conversation."""

from __future__ import annotations

from workers.sessions import Script, Sessions, script_of


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_script_of_drops_recorded_answers() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        user("q1"),
        {"role": "assistant", "content": "recorded"},
        user("q2"),
    ]
    script = script_of(messages, "", 7)
    assert script.turns == [[{"role": "system", "content": "sys"}, user("q1")], [user("q2")]]
    assert script.max_tokens == 7
    assert script_of(None, "hello", None).turns == [[user("hello")]]


def test_turns_carry_the_history_and_end_after_n() -> None:
    made: list[int] = []

    def new_script(n: int) -> Script:
        made.append(n)
        return Script([[user(f"c{n}t{k}")] for k in range(5)])

    sessions = Sessions(2, "shared", new_script)
    first, max_tokens, _ = sessions.next(0)
    assert first == [{"role": "system", "content": "shared"}, user("c0t0")]
    assert max_tokens is None
    sessions.done(0, "answer0")
    second, _, local = sessions.next(1)
    assert second == [*first, {"role": "assistant", "content": "answer0"}, user("c0t1")]
    assert local >= 1
    sessions.done(1, "answer1")
    # Two turns done: the next request starts a new conversation with the same system prompt.
    third, _, _ = sessions.next(2)
    assert third == [{"role": "system", "content": "shared"}, user("c1t0")]
    # A failed turn ends its conversation.
    sessions.done(2, None)
    assert sessions.next(3)[0][-1] == user("c2t0")
    assert made == [0, 1, 2]
