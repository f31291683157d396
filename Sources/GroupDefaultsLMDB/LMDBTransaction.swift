internal import CLMDB

/// A borrowed LMDB transaction, valid only inside the closure that received it.
///
/// Buffers it returns point into the map and are valid until the transaction ends; a size larger
/// than the map (a damaged node) yields `LMDBError.corrupted`, not a wild read.
package struct LMDBTransaction {
    package let txn: OpaquePointer
    /// Not retained: a transaction lives only inside the `Environment` call that made it, which
    /// holds the environment for as long (copying a strong reference cost every get and put a
    /// retain and a release).
    package unowned(unsafe) let environment: Environment

    package func get(_ database: Database, _ key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(txn, environment.handle(database), &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc)
        return try checked(v)
    }

    /// Stores `value` under `key`. With `append`, `key` must sort after every key in the database
    /// (LMDB then skips the search: `MDB_APPEND`).
    package func put(_ database: Database, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, append: Bool = false) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try noteMapFull(mdb_put(txn, environment.handle(database), &k, &v, append ? UInt32(MDB_APPEND) : 0))
        environment.noteChange()
    }

    /// Stores a value of `size` bytes under `key` and returns its bytes, uninitialised, for the
    /// caller to fill (`MDB_RESERVE`: LMDB writes no copy). The caller must fill them before its
    /// next write in this transaction, which may move them. With `append`, as `put`.
    package func reserve(_ database: Database, _ key: UnsafeRawBufferPointer, size: Int, append: Bool = false) throws -> UnsafeMutableRawBufferPointer
    {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: size, mv_data: nil)
        try noteMapFull(mdb_put(txn, environment.handle(database), &k, &v, UInt32(MDB_RESERVE) | (append ? UInt32(MDB_APPEND) : 0)))
        environment.noteChange()
        return UnsafeMutableRawBufferPointer(start: v.mv_data, count: size)
    }

    /// Stores `value` under `key` unless `key` is there already (then nothing is written, not even
    /// the page: `MDB_NOOVERWRITE`); returns whether it stored it.
    @discardableResult
    package func insert(_ database: Database, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        let rc = mdb_put(txn, environment.handle(database), &k, &v, UInt32(MDB_NOOVERWRITE))
        if rc == MDB_KEYEXIST { return false }
        try noteMapFull(rc)
        environment.noteChange()
        return true
    }

    /// Deletes entries from the front of `database` while `shouldDelete(key)` holds.
    package func deleteLeading(_ database: Database, while shouldDelete: (UnsafeRawBufferPointer) throws -> Bool) throws {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, environment.handle(database), &cursor))
        defer { mdb_cursor_close(cursor) }
        var k = MDB_val()
        var v = MDB_val()
        while true {
            let rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST)
            if rc == MDB_NOTFOUND { return }
            try check(rc)
            guard try shouldDelete(checked(k)) else { return }
            try noteMapFull(mdb_cursor_del(cursor, 0))
            environment.noteChange()
        }
    }

    /// Deletes `key`; returns whether it was there.
    @discardableResult
    package func delete(_ database: Database, _ key: UnsafeRawBufferPointer) throws -> Bool {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        let rc = mdb_del(txn, environment.handle(database), &k, nil)
        if rc == MDB_NOTFOUND { return false }
        try noteMapFull(rc)
        environment.noteChange()
        return true
    }

    /// Removes every entry of `database`, keeping the database itself.
    package func empty(_ database: Database) throws {
        try noteMapFull(mdb_drop(txn, environment.handle(database), 0))
        environment.noteChange()
    }

    /// The number of entries, read from the database record (no scan).
    package func count(_ database: Database) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(txn, environment.handle(database), &stat))
        return stat.ms_entries
    }

    /// Calls `body` for each entry in key order, starting at `start` (or the first key), until it
    /// returns false.
    package func forEach(
        _ database: Database,
        from start: UnsafeRawBufferPointer? = nil,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, environment.handle(database), &cursor))
        defer { mdb_cursor_close(cursor) }
        var k = MDB_val()
        var v = MDB_val()
        var op = MDB_FIRST
        if let start {
            k = MDB_val(mv_size: start.count, mv_data: UnsafeMutableRawPointer(mutating: start.baseAddress))
            op = MDB_SET_RANGE
        }
        while true {
            let rc = mdb_cursor_get(cursor, &k, &v, op)
            if rc == MDB_NOTFOUND { return }
            try check(rc)
            guard try body(checked(k), checked(v)) else { return }
            op = MDB_NEXT
        }
    }

    /// The last entry in key order.
    package func last(_ database: Database) throws -> (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)? {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, environment.handle(database), &cursor))
        defer { mdb_cursor_close(cursor) }
        var k = MDB_val()
        var v = MDB_val()
        let rc = mdb_cursor_get(cursor, &k, &v, MDB_LAST)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc)
        return (try checked(k), try checked(v))
    }

    @inline(__always)
    private func checked(_ value: MDB_val) throws -> UnsafeRawBufferPointer {
        guard value.mv_size > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        guard let data = value.mv_data, environment.fitsInMap(value.mv_size) else {
            throw LMDBError.corrupted
        }
        return UnsafeRawBufferPointer(start: data, count: value.mv_size)
    }

    @inline(__always)
    private func noteMapFull(_ rc: Int32) throws {
        if rc == MDB_MAP_FULL { environment.noteMapFull() }
        try check(rc)
    }
}
