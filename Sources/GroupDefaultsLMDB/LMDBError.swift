internal import CLMDB

/// An error code returned by LMDB (or an `errno` value it passed through).
///
/// One small struct instead of an enum mirroring every C constant, in the manner of
/// swift-system's `Errno`: the common codes have names, `catch LMDBError.mapFull` works,
/// and every other code still prints LMDB's own message.
package struct LMDBError: Error, Hashable, CustomStringConvertible {
    package let code: Int32

    package init(_ code: Int32) { self.code = code }

    package static let notFound = LMDBError(MDB_NOTFOUND)
    package static let pageNotFound = LMDBError(MDB_PAGE_NOTFOUND)
    package static let corrupted = LMDBError(MDB_CORRUPTED)
    package static let panic = LMDBError(MDB_PANIC)
    package static let versionMismatch = LMDBError(MDB_VERSION_MISMATCH)
    package static let invalid = LMDBError(MDB_INVALID)
    package static let mapFull = LMDBError(MDB_MAP_FULL)
    package static let readersFull = LMDBError(MDB_READERS_FULL)
    package static let mapResized = LMDBError(MDB_MAP_RESIZED)
    package static let badReaderSlot = LMDBError(MDB_BAD_RSLOT)
    package static let badValueSize = LMDBError(MDB_BAD_VALSIZE)

    /// True for the codes that mean the file's contents cannot be trusted.
    package var meansCorruption: Bool {
        self == .corrupted || self == .pageNotFound || self == .invalid || self == .panic
    }

    package var description: String { String(cString: mdb_strerror(code)) }

    package static func ~= (pattern: LMDBError, error: any Error) -> Bool {
        (error as? LMDBError) == pattern
    }
}

/// Turns an LMDB return code into a thrown `LMDBError`; the one place every C call goes through.
@inline(__always)
func check(_ rc: Int32) throws(LMDBError) {
    if rc != 0 { throw LMDBError(rc) }
}
