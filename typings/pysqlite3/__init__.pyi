# pysqlite3 ships no type information; its API is the standard library's sqlite3 (see dbapi2.pyi).
