"""The SQLite door: every connection it opens has sqlite-vec loaded, found without importing its package."""

from __future__ import annotations

import os

import sqlite_vec

from pipeline import db


def test_the_vec_extension_is_the_one_the_sqlite_vec_package_names() -> None:
    assert os.path.normpath(db.vec_extension()) == sqlite_vec.loadable_path()


def test_a_connection_has_the_vec_functions() -> None:
    conn = db.memory_connection()
    assert conn.execute("SELECT vec_length(vec_f32('[1, 2, 3]'))").fetchone()[0] == 3
