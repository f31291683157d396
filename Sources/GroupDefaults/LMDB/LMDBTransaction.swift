internal import CLMDB

/// A borrowed LMDB transaction, valid only inside the closure that received it.
///
/// Buffers it returns point into the map and are valid until the transaction ends; a size larger
/// than the map (a damaged node) yields `LMDBError.corrupted`, not a wild read.
struct LMDBTransaction {
    let txn: OpaquePointer
    let environment: Environment

    func get(_ database: NamedDatabase, _ key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(txn, environment.handle(database), &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc)
        return try checked(v)
    }

    /// Stores `value` under `key`. With `append`, `key` must sort after every key in the database
    /// (LMDB then skips the search: `MDB_APPEND`).
    func put(_ database: NamedDatabase, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, append: Bool = false) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try noteMapFull(mdb_put(txn, environment.handle(database), &k, &v, append ? UInt32(MDB_APPEND) : 0))
    }

    /// Deletes entries from the front of `database` while `shouldDelete(key)` holds.
    func deleteLeading(_ database: NamedDatabase, while shouldDelete: (UnsafeRawBufferPointer) throws -> Bool) throws {
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
        }
    }

    /// Deletes `key`; returns whether it was there.
    @discardableResult
    func delete(_ database: NamedDatabase, _ key: UnsafeRawBufferPointer) throws -> Bool {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        let rc = mdb_del(txn, environment.handle(database), &k, nil)
        if rc == MDB_NOTFOUND { return false }
        try noteMapFull(rc)
        return true
    }

    /// Removes every entry of `database`, keeping the database itself.
    func empty(_ database: NamedDatabase) throws {
        try noteMapFull(mdb_drop(txn, environment.handle(database), 0))
    }

    /// The number of entries, read from the database record (no scan).
    func count(_ database: NamedDatabase) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(txn, environment.handle(database), &stat))
        return stat.ms_entries
    }

    /// Calls `body` for each entry in key order, starting at `start` (or the first key), until it
    /// returns false.
    func forEach(
        _ database: NamedDatabase,
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
    func last(_ database: NamedDatabase) throws -> (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)? {
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
