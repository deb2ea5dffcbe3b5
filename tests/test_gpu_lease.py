"""The per-node GPU lease book (issue 12, item 5): oldest first, no starvation, backfill only before."""

from __future__ import annotations

from reb_ray.trial.gpu_lease import LeaseBook


def test_requests_that_fit_are_granted_in_order_and_released_gpus_go_to_the_next():
    book = LeaseBook(["0", "1"])
    book.request("a", 1, 60)
    book.request("b", 1, 60)
    book.request("c", 1, 60)
    assert book.grant(0) == {"a": ["0"], "b": ["1"]}
    assert book.grant(1) == {}  # c waits: both GPUs are leased
    book.release("b")
    assert book.grant(2) == {"c": ["1"]}
    assert book.free == []


def test_a_two_gpu_request_waiting_for_one_gpu_is_not_overtaken_by_one_gpu_requests():
    book = LeaseBook(["0", "1"])
    book.request("one", 1, 60)
    assert book.grant(0) == {"one": ["0"]}
    book.request("two", 2, 60)
    book.request("late", 1, 60)  # fits on the free GPU, but would end after "one" frees its GPU
    assert book.grant(1) == {}
    book.release("one")
    assert book.grant(30) == {"two": ["0", "1"]}
    book.release("two")
    assert book.grant(40) == {"late": ["0"]}


def test_a_short_request_backfills_a_free_gpu_when_it_ends_before_the_reserved_start():
    book = LeaseBook(["0", "1"])
    book.request("long", 1, 600)
    book.grant(0)
    book.request("two", 2, 60)
    book.request("short", 1, 100)  # ends at 110, before "long" is expected to free its GPU at 600
    assert book.grant(10) == {"short": ["1"]}


def test_a_request_past_the_node_is_capped_and_a_waiting_one_can_be_withdrawn():
    book = LeaseBook(["7"])
    book.request("big", 4, 60)
    assert book.grant(0) == {"big": ["7"]}
    book.request("gone", 1, 60)
    book.release("gone")  # its worker died while waiting
    book.release("big")
    assert book.grant(1) == {} and book.free == ["7"] and not book.waiting
