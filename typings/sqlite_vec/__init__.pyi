# sqlite-vec ships no type information; only the loader knowledge calls is declared.
from sqlite3 import Connection

def load(conn: Connection) -> None: ...
