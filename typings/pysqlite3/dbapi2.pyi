# pysqlite3.dbapi2 is the standard library's sqlite3 module built against a current SQLite, with the
# same API; type-check it as that module.
from sqlite3 import *
from sqlite3 import Connection as Connection, DatabaseError as DatabaseError, OperationalError as OperationalError, Row as Row
