"""The off-wafer links: exact cycles on hand-sized cases."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from wsesim.sim.executors.links import GradientLink, WeightStream


def _stream(sizes, capacity=200.0, rate=10.0):
    env = simpy.Environment()
    stream = WeightStream(env, [(f"c{i}",) for i in range(len(sizes))], np.array(sizes, float), capacity, rate)
    env.process(stream.process())
    return env, stream


@pytest.mark.parametrize("free_early", [False, True])
def test_full_buffer_holds_the_stream_until_a_free(free_early: bool) -> None:
    """Three 100 B chunks, a 200 B buffer, 10 B/cycle.

    c0 arrives at 10, c1 at 20 (the buffer is now full). A consumer uses c0 from 10 for 50 cycles and
    frees it at 60; only then can c2 start: it arrives at 70. Registering that free in advance (at cycle
    10, for cycle 60) gives the same timeline as freeing it when it happens.
    """
    env, stream = _stream([100, 100, 100])

    def consumer(env):
        yield env.timeout(10)
        if free_early:
            stream.free_at(np.array([60.0]), np.array([100.0]))
        else:
            yield env.timeout(50)
            stream.free(100.0)

    env.process(consumer(env))
    env.run()
    assert stream.arrival.tolist() == [10.0, 20.0, 70.0]
    assert stream.start.tolist() == [0.0, 10.0, 60.0]
    assert stream.bytes_in == 300.0


def test_waiting_for_an_unscheduled_chunk() -> None:
    """A consumer that asks for c2 before the stream has reached it is woken at its arrival (70)."""
    env, stream = _stream([100, 100, 100])
    seen = []

    def consumer(env):
        yield env.timeout(1)
        assert stream.next == 2  # c2 is not scheduled: the buffer is full
        event = stream.wait(2)
        stream.free_at(np.array([60.0]), np.array([100.0]))
        yield event
        seen.append(env.now)

    env.process(consumer(env))
    env.run()
    assert seen == [70.0]


def test_gradient_link_is_fifo_at_its_rate() -> None:
    """Gradients of 100 B at cycles 0, 0 and 50 over a 10 B/cycle link leave at 10, 20 and 60."""
    link = GradientLink(capacity_bytes=150.0, bytes_per_cycle=10.0)
    start, left = link.send(np.array([0.0, 0.0, 50.0]), np.array([100.0, 100.0, 100.0]))
    assert start.tolist() == [0.0, 10.0, 50.0]
    assert left.tolist() == [10.0, 20.0, 60.0]
    # a later batch waits for the link: handed over at 55, it starts at 60
    start2, left2 = link.send(np.array([55.0]), np.array([50.0]))
    assert (start2[0], left2[0]) == (60.0, 65.0)


def test_gradient_buffer_room() -> None:
    """300 B buffered at cycle 5 in a 150 B buffer: it fits again when the second gradient has left (20)."""
    link = GradientLink(capacity_bytes=150.0, bytes_per_cycle=10.0)
    link.send(np.array([0.0, 0.0, 0.0]), np.array([100.0, 100.0, 100.0]))
    assert link.room_at(5.0) == 20.0
    assert link.room_at(25.0) == 25.0
