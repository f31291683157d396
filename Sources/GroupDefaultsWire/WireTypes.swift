import Foundation

// The sync protocol's JSON bodies, shared by the sync client and the server (ARCHITECTURE.md).
// Values are the core's typed JSON; HLCs and origins are decimal strings, because 64-bit integers do
// not survive every JSON parser; revisions are plain numbers (a server counter, far below 2^53).
// Keys are snake_case on the wire. Decoding checks shape (an entry is a value or a deletion, never
// both); limits are the server's business.

/// One key's state on the server: a value or a deletion, with the stamp of the write that made it
/// and, where the server says, its revision. In an end-to-end encrypted suite the key is an opaque
/// key id and the entry carries a sealed payload (`SealedPayload`) instead of a value, a deletion
/// included.
///
/// ```json
/// {"key": "sound", "value": {"string": "ring.caf"}, "hlc": "121…", "origin": "998…", "rev": 42}
/// {"key": "draft", "deleted": true, "hlc": "121…", "origin": "998…", "rev": 43}
/// {"key": "3f9c…", "sealed": {"epoch": 1, "box": "<base64>"}, "hlc": "121…", "origin": "998…", "rev": 44}
/// {"key": "layout", "unavailable": "too_deep", "hlc": "121…", "origin": "998…", "rev": 45}
/// ```
///
/// The last is a value the server holds but does not serve (`UnavailableValue`); a device also
/// decodes an entry whose value is not valid typed JSON as one (`damaged`).
public struct SyncEntry: Codable, Sendable, Hashable {
    /// The key the entry is for (an opaque key id in an encrypted suite).
    public var key: String
    /// The value, or nil for a deletion or a sealed entry.
    public var value: PropertyListValue?
    /// The sealed payload of an entry of an end-to-end encrypted suite; nil in a plain suite.
    public var sealed: SealedPayload?
    /// Whether the entry is a deletion (a tombstone): `"deleted": true` on the wire.
    public var isDeleted: Bool
    /// The hybrid logical clock stamp of the write that made the entry, from the writing store's
    /// clock (`hlc`, a decimal string on the wire).
    public var hlc: HLC
    /// The origin id of the store that made the write: the `device_id` of its push (`origin`, a
    /// decimal string on the wire).
    public var origin: UInt64
    /// The server revision that wrote this entry (absent where no revision applies).
    public var rev: UInt64?
    /// The account whose device pushed the entry, in a suite shared between accounts (see
    /// `Membership`): present when it is not the suite's owner; nil for the owner's own writes and
    /// in a suite that was never shared. The server states it from the pushing token.
    public var account: String?
    /// Why the key's value is not here although the key holds one (then `value` and `sealed` are
    /// nil and `isDeleted` is false): the server does not serve it, or this device cannot decode
    /// it. Nil for every other entry.
    public var unavailable: UnavailableValue?

    /// An entry; a nil `value` makes it a deletion (a tombstone), and `rev` is the server revision
    /// that stored it, or nil where no revision applies.
    public init(key: String, value: PropertyListValue?, hlc: HLC, origin: UInt64, rev: UInt64? = nil) {
        self.key = key
        self.value = value
        self.sealed = nil
        self.isDeleted = value == nil
        self.hlc = hlc
        self.origin = origin
        self.rev = rev
    }

    /// A sealed entry of an encrypted suite: `keyID` is the key's opaque id, `deleted` says whether
    /// the write was a deletion (the payload is sealed either way).
    public init(keyID: String, sealed: SealedPayload, deleted: Bool, hlc: HLC, origin: UInt64, rev: UInt64? = nil) {
        self.key = keyID
        self.value = nil
        self.sealed = sealed
        self.isDeleted = deleted
        self.hlc = hlc
        self.origin = origin
        self.rev = rev
    }

    /// An entry of a value the server holds but does not serve, for `reason`.
    public init(key: String, unavailable reason: UnavailableValue, hlc: HLC, origin: UInt64, rev: UInt64? = nil) {
        self.init(key: key, value: nil, hlc: hlc, origin: origin, rev: rev)
        self.isDeleted = false
        self.unavailable = reason
    }

    /// The write's stamp, (HLC, origin): of two entries for one key, the larger stamp wins.
    public var stamp: Stamp { Stamp(hlc: hlc, origin: origin) }

    enum CodingKeys: String, CodingKey { case key, value, sealed, deleted, hlc, origin, rev, account, unavailable }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        key = try container.decode(String.self, forKey: .key)
        if let reason = try container.decodeIfPresent(UnavailableValue.self, forKey: .unavailable) {
            (value, sealed, isDeleted, unavailable) = (nil, nil, false, reason)
        } else {
            do {
                (value, sealed, isDeleted) = try container.decodeContent()
            } catch  where container.contains(.value) && !container.contains(.sealed) && !container.contains(.deleted) {
                // A value that is not typed JSON: that key alone, not the page around it.
                (value, sealed, isDeleted, unavailable) = (nil, nil, false, .damaged)
            }
        }
        hlc = try container.decode(HLC.self, forKey: .hlc)
        origin = try container.decodeDecimal(forKey: .origin)
        rev = try container.decodeIfPresent(UInt64.self, forKey: .rev)
        account = try container.decodeIfPresent(String.self, forKey: .account)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(key, forKey: .key)
        if let unavailable {
            try container.encode(unavailable, forKey: .unavailable)
        } else {
            try container.encodeContent(value, sealed: sealed, deleted: isDeleted)
        }
        try container.encode(hlc, forKey: .hlc)
        try container.encode(String(origin), forKey: .origin)
        try container.encodeIfPresent(rev, forKey: .rev)
        try container.encodeIfPresent(account, forKey: .account)
    }
}

/// What the server stores of an entry of an end-to-end encrypted suite: the key epoch it was sealed
/// under and the sealed bytes (nonce, ciphertext and tag), which only the suite's devices can open.
///
/// ```json
/// {"epoch": 1, "box": "<base64>"}
/// ```
public struct SealedPayload: Codable, Sendable, Hashable {
    /// The key epoch the payload was sealed under (1 for a suite's first key; `rotate-key` adds one).
    public var epoch: UInt32
    /// The sealed bytes: a 12-byte nonce, the ciphertext, a 16-byte tag (base64 on the wire).
    public var box: [UInt8]

    /// The bytes sealing adds to a value, besides the key name and padding: a 12-byte nonce, a
    /// 16-byte tag, the format version and length (5), the key name's length (2), the HLC (8) and
    /// the flags (1).
    public static let fixedOverhead = 12 + 16 + 5 + 2 + 8 + 1
    /// The most the padding adds, in percent of the unpadded plaintext (PADMÉ).
    public static let maximumPaddingPercent = 12

    /// A payload sealed under `epoch`.
    public init(epoch: UInt32, box: [UInt8]) {
        self.epoch = epoch
        self.box = box
    }

    enum CodingKeys: String, CodingKey { case epoch, box }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        epoch = try container.decode(UInt32.self, forKey: .epoch)
        let text = try container.decode(String.self, forKey: .box)
        guard let bytes = Data(base64Encoded: text), !bytes.isEmpty else {
            throw DecodingError.dataCorruptedError(forKey: .box, in: container, debugDescription: "box must be non-empty base64")
        }
        box = Array(bytes)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(epoch, forKey: .epoch)
        try container.encode(Data(box).base64EncodedString(), forKey: .box)
    }
}

/// One change in a push: a value or a deletion, stamped by the device (whose id is the batch's
/// `device_id`, the origin of every op). In an encrypted suite the key is an opaque key id and the
/// op carries a sealed payload instead of a value.
public struct PushOp: Codable, Sendable, Hashable {
    /// The key, at most `max_key_bytes` bytes of UTF-8 (`SyncLimits.maxKeyBytes`).
    public var key: String
    /// The new value, or nil for a deletion or a sealed op (`"deleted": true` on the wire).
    public var value: PropertyListValue?
    /// The sealed payload of an op of an encrypted suite; nil in a plain suite.
    public var sealed: SealedPayload?
    /// Whether the op is a deletion.
    public var isDeleted: Bool
    /// The HLC the device's store stamped the write with (a decimal string on the wire); at most
    /// `max_clock_skew_ms` ahead of the server's clock.
    public var hlc: HLC
    /// The origin of a write another device made, whose stamp (`hlc`, `origin`) the op keeps: a
    /// re-seal after a key rotation, or an upload of what a device holds after the server lost it
    /// (an operator's reset). It competes by last writer wins with that stamp, and replaces an entry
    /// of the very same stamp only to seal it under a newer key epoch. Nil for a device's own
    /// writes, whose origin is the push's `device_id`.
    public var origin: UInt64?

    /// An op that sets `key` to `value`, or deletes it when `value` is nil, stamped `hlc`.
    public init(key: String, value: PropertyListValue?, hlc: HLC) {
        self.key = key
        self.value = value
        self.sealed = nil
        self.isDeleted = value == nil
        self.hlc = hlc
    }

    /// A sealed op of an encrypted suite: the key's opaque id, the payload, whether it deletes; with
    /// `origin`, a re-seal of the write stamped (`hlc`, `origin`).
    public init(keyID: String, sealed: SealedPayload, deleted: Bool, hlc: HLC, resealing origin: UInt64? = nil) {
        self.key = keyID
        self.value = nil
        self.sealed = sealed
        self.isDeleted = deleted
        self.hlc = hlc
        self.origin = origin
    }

    enum CodingKeys: String, CodingKey { case key, value, sealed, deleted, hlc, origin }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        key = try container.decode(String.self, forKey: .key)
        (value, sealed, isDeleted) = try container.decodeContent()
        hlc = try container.decode(HLC.self, forKey: .hlc)
        if container.contains(.origin) { origin = try container.decodeDecimal(forKey: .origin) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(key, forKey: .key)
        try container.encodeContent(value, sealed: sealed, deleted: isDeleted)
        try container.encode(hlc, forKey: .hlc)
        if let origin { try container.encode(String(origin), forKey: .origin) }
    }
}

/// `POST /v1/suites/{suite}/push`: a batch of ops, all or nothing, idempotent by `batchID`.
public struct PushRequest: Codable, Sendable, Hashable {
    /// The pushing store's origin id.
    public var deviceID: UInt64
    /// The batch's id (`batch_id`), chosen by the device: a retry sends the same id with the same
    /// ops, and the server applies the batch once (other ops under a used id are refused).
    public var batchID: String
    /// The changes, at most `max_ops_per_batch` of them, written all or nothing.
    public var ops: [PushOp]

    /// A push of `ops` by the store whose origin id is `deviceID`, identified by `batchID`.
    public init(deviceID: UInt64, batchID: String, ops: [PushOp]) {
        self.deviceID = deviceID
        self.batchID = batchID
        self.ops = ops
    }

    enum CodingKeys: String, CodingKey {
        case deviceID = "device_id"
        case batchID = "batch_id"
        case ops
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        deviceID = try container.decodeDecimal(forKey: .deviceID)
        batchID = try container.decode(String.self, forKey: .batchID)
        ops = try container.decode([PushOp].self, forKey: .ops)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(String(deviceID), forKey: .deviceID)
        try container.encode(batchID, forKey: .batchID)
        try container.encode(ops, forKey: .ops)
    }
}

/// What the server did with one op of a push.
public struct PushResult: Codable, Sendable, Hashable {
    /// Whether the op was stored (`status` on the wire).
    public enum Status: String, Codable, Sendable {
        /// The op won and was stored.
        case applied
        /// The server already held a later write (or deletion) of the key: `winner`.
        case superseded
        /// The op breaks a rule of its own (`error` says which: `clock_skew`, `value_too_large`)
        /// and was not stored; the batch's other ops were judged as if it were not there.
        case refused
    }

    /// The key of the op.
    public var key: String
    /// Whether the op was stored, lost to a later write of the key, or refused.
    public var status: Status
    /// The entry the server holds for the key after the push; nil only for a refused op of a key
    /// the server holds nothing for.
    public var winner: SyncEntry?
    /// Why a refused op was refused (nil for the others).
    public var error: SyncErrorCode?
    /// The refusal in words, for a person (nil unless refused).
    public var detail: String?

    /// The result of the op on `key`, with the entry the server holds for it after the push, and
    /// for a refused op its error code and detail.
    public init(key: String, status: Status, winner: SyncEntry?, error: SyncErrorCode? = nil, detail: String? = nil) {
        self.key = key
        self.status = status
        self.winner = winner
        self.error = error
        self.detail = detail
    }
}

/// The answer to a push.
public struct PushResponse: Codable, Sendable, Hashable {
    /// The suite's head revision after the push (`head_rev`).
    public var headRev: UInt64
    /// One result per op, in the order of the ops.
    public var results: [PushResult]
    /// The server's clock, as typed JSON dates are written (`2026-11-21T10:00:00.000Z`).
    public var serverTime: String

    /// An answer: the suite's head revision, each op's result in order, and the server's clock.
    public init(headRev: UInt64, results: [PushResult], serverTime: String) {
        self.headRev = headRev
        self.results = results
        self.serverTime = serverTime
    }

    enum CodingKeys: String, CodingKey {
        case headRev = "head_rev"
        case results
        case serverTime = "server_time"
    }
}

/// `GET /v1/suites/{suite}/changes`: the latest entry of each key changed after `since`, in
/// revision order.
public struct ChangesPage: Codable, Sendable, Hashable {
    /// The latest entry of each key changed after `since`, at most `limit` of them, in revision
    /// order.
    public var entries: [SyncEntry]
    /// The `since` to pass next: the last entry's revision, or the suite's head when none.
    public var lastRev: UInt64
    /// Whether more changes follow at once (`has_more`): the page was cut at `limit`, so ask again
    /// with `lastRev` as `since`.
    public var hasMore: Bool

    /// A page of changes; `lastRev` is the last entry's revision, or the suite's head revision when
    /// `entries` is empty.
    public init(entries: [SyncEntry], lastRev: UInt64, hasMore: Bool) {
        self.entries = entries
        self.lastRev = lastRev
        self.hasMore = hasMore
    }

    enum CodingKeys: String, CodingKey {
        case entries
        case lastRev = "last_rev"
        case hasMore = "has_more"
    }
}

/// `GET /v1/suites/{suite}/snapshot`: every entry (unexpired tombstones included) in key order.
public struct SnapshotPage: Codable, Sendable, Hashable {
    /// Entries in key order (by UTF-8 bytes), unexpired tombstones included.
    public var entries: [SyncEntry]
    /// The suite's head revision when the page was read (`head_rev`): after the last page, pass it
    /// as `since` to `changes`.
    public var headRev: UInt64
    /// The key to continue after, or nil on the last page (encoded as `null`).
    public var next: String?

    /// A page of the snapshot; `next` is nil on the last page.
    public init(entries: [SyncEntry], headRev: UInt64, next: String?) {
        self.entries = entries
        self.headRev = headRev
        self.next = next
    }

    enum CodingKeys: String, CodingKey {
        case entries
        case headRev = "head_rev"
        case next
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(entries, forKey: .entries)
        try container.encode(headRev, forKey: .headRev)
        try container.encode(next, forKey: .next)  // explicit null on the last page
    }
}

/// `GET /v1/limits`: what the server accepts.
public struct SyncLimits: Codable, Sendable, Hashable {
    /// The most UTF-8 bytes in a key (`max_key_bytes`; 511 by default, LMDB's key limit in the
    /// core).
    public var maxKeyBytes: Int
    /// Measured as the value's typed JSON.
    public var maxValueBytes: Int
    /// The most live keys in a suite, tombstones not counted (`max_keys_per_suite`; 10,000 by
    /// default).
    public var maxKeysPerSuite: Int
    /// The most bytes in a suite, summed over its live keys by `quotaBytes(key:valueJSONByteCount:)`
    /// (`max_bytes_per_suite`; 16 MiB by default).
    public var maxBytesPerSuite: Int
    /// The most ops in one push (`max_ops_per_batch`; 500 by default).
    public var maxOpsPerBatch: Int
    /// The most bytes in a request body (`max_body_bytes`; 2 MiB by default).
    public var maxBodyBytes: Int
    /// How far ahead of the server's clock an HLC may be.
    public var maxClockSkewMilliseconds: UInt64
    /// What sealing adds to a value in an end-to-end encrypted suite, before padding
    /// (`sealed_fixed_bytes`): nonce, tag, format header, HLC and flags (`SealedPayload.fixedOverhead`),
    /// to which the key name's bytes are added. The limits apply to the sealed bytes.
    public var sealedFixedBytes: Int = SealedPayload.fixedOverhead
    /// The most padding adds to a sealed value, in percent (`sealed_padding_max_percent`).
    public var sealedPaddingMaxPercent: Int = SealedPayload.maximumPaddingPercent
    /// How many event streams and waiting long-polls one token may hold open at once, per server
    /// instance (`max_streams_per_token`; 100 by default); 429 `too_many_streams` beyond.
    public var maxStreamsPerToken: Int

    /// Limits; each one left out takes the server's default: 511-byte keys, 1 MiB values, 10,000
    /// keys and 16 MiB per suite, 500 ops per push, bodies of `bodyBytes(forValueBytes:)` (2 MiB
    /// for 1 MiB values), 5 minutes of clock skew (`HLC.maximumDrift`) and 100 open streams per
    /// token.
    public init(
        maxKeyBytes: Int = 511,
        maxValueBytes: Int = 1 << 20,
        maxKeysPerSuite: Int = 10_000,
        maxBytesPerSuite: Int = 16 << 20,
        maxOpsPerBatch: Int = 500,
        maxBodyBytes: Int? = nil,
        maxClockSkewMilliseconds: UInt64 = HLC.maximumDrift,
        maxStreamsPerToken: Int = 100
    ) {
        self.maxStreamsPerToken = maxStreamsPerToken
        self.maxKeyBytes = maxKeyBytes
        self.maxValueBytes = maxValueBytes
        self.maxKeysPerSuite = maxKeysPerSuite
        self.maxBytesPerSuite = maxBytesPerSuite
        self.maxOpsPerBatch = maxOpsPerBatch
        self.maxBodyBytes = maxBodyBytes ?? Self.bodyBytes(forValueBytes: maxValueBytes)
        self.maxClockSkewMilliseconds = maxClockSkewMilliseconds
    }

    /// The body a push may take when values may take `valueBytes`: 2 MiB, or more when a value of
    /// that size needs more (the value and 64 KiB for its op's key, stamps and the batch around
    /// it), so that a device can always send its largest value.
    public static func bodyBytes(forValueBytes valueBytes: Int) -> Int {
        max(2 << 20, valueBytes + (64 << 10))
    }

    /// What a live entry counts against `maxBytesPerSuite`: its key's UTF-8 bytes and its value's
    /// typed JSON bytes (`PropertyListValue.typedJSON()`).
    public static func quotaBytes(key: String, valueJSONByteCount: Int) -> Int {
        key.utf8.count + valueJSONByteCount
    }

    enum CodingKeys: String, CodingKey {
        case maxKeyBytes = "max_key_bytes"
        case maxValueBytes = "max_value_bytes"
        case maxKeysPerSuite = "max_keys_per_suite"
        case maxBytesPerSuite = "max_bytes_per_suite"
        case maxOpsPerBatch = "max_ops_per_batch"
        case maxBodyBytes = "max_body_bytes"
        case maxClockSkewMilliseconds = "max_clock_skew_ms"
        case sealedFixedBytes = "sealed_fixed_bytes"
        case sealedPaddingMaxPercent = "sealed_padding_max_percent"
        case maxStreamsPerToken = "max_streams_per_token"
    }

    /// Decodes the limits; `max_streams_per_token`, which servers before it did not publish, is
    /// taken as its default when absent.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        maxKeyBytes = try container.decode(Int.self, forKey: .maxKeyBytes)
        maxValueBytes = try container.decode(Int.self, forKey: .maxValueBytes)
        maxKeysPerSuite = try container.decode(Int.self, forKey: .maxKeysPerSuite)
        maxBytesPerSuite = try container.decode(Int.self, forKey: .maxBytesPerSuite)
        maxOpsPerBatch = try container.decode(Int.self, forKey: .maxOpsPerBatch)
        maxBodyBytes = try container.decode(Int.self, forKey: .maxBodyBytes)
        maxClockSkewMilliseconds = try container.decode(UInt64.self, forKey: .maxClockSkewMilliseconds)
        sealedFixedBytes = try container.decode(Int.self, forKey: .sealedFixedBytes)
        sealedPaddingMaxPercent = try container.decode(Int.self, forKey: .sealedPaddingMaxPercent)
        maxStreamsPerToken = try container.decodeIfPresent(Int.self, forKey: .maxStreamsPerToken) ?? Self().maxStreamsPerToken
    }
}

/// `GET /v1/suites`: the account's suites.
public struct SuiteList: Codable, Sendable, Hashable {
    /// One suite of the account, as the list gives it.
    public struct Suite: Codable, Sendable, Hashable {
        /// The suite's name, as in `/v1/suites/{suite}`.
        public var name: String
        /// The suite's head revision, the revision of its latest write (`head_rev`).
        public var headRev: UInt64
        /// How many live keys the suite holds (tombstones not counted).
        public var keys: Int
        /// For a suite another account shares with the token's: that account, the suite's owner
        /// (the `owner` parameter of its routes); nil for the account's own suites.
        public var owner: String?
        /// For a shared suite: the token's account's role in it; nil for the account's own suites.
        public var role: SuiteRole?

        /// A suite named `name` at head revision `headRev`, holding `keys` live keys; shared by
        /// `owner` with `role`, or the account's own (nil).
        public init(name: String, headRev: UInt64, keys: Int, owner: String? = nil, role: SuiteRole? = nil) {
            self.name = name
            self.headRev = headRev
            self.keys = keys
            self.owner = owner
            self.role = role
        }

        enum CodingKeys: String, CodingKey {
            case name
            case headRev = "head_rev"
            case keys, owner, role
        }
    }

    /// The suites of the token's account that have been written, by name, then the suites other
    /// accounts share with it, by owner and name.
    public var suites: [Suite]

    /// A list of `suites`.
    public init(suites: [Suite]) { self.suites = suites }
}

/// Every error answer of the server: a machine-readable code, words for a person, and what helps.
///
/// ```json
/// {"error": "value_too_large", "detail": "the value of 'wallpaper' takes 2097152 bytes …", "key": "wallpaper", "limit": 1048576}
/// ```
public struct SyncErrorBody: Codable, Sendable, Hashable, Error, CustomStringConvertible, SyncErrorCoded {
    /// What went wrong, for code to match on.
    public var error: SyncErrorCode
    /// What went wrong, for a person.
    public var detail: String
    /// The key concerned, if one is.
    public var key: String?
    /// The limit concerned, if one is.
    public var limit: Int?
    /// The server's clock (`clock_skew`), as typed JSON writes dates.
    public var serverTime: String?

    /// An error answer.
    public init(error: SyncErrorCode, detail: String, key: String? = nil, limit: Int? = nil, serverTime: String? = nil) {
        self.error = error
        self.detail = detail
        self.key = key
        self.limit = limit
        self.serverTime = serverTime
    }

    enum CodingKeys: String, CodingKey {
        case error, detail, key, limit
        case serverTime = "server_time"
    }

    public var description: String { "\(error): \(detail)" }

    /// The code (`error`), so that `catch SyncErrorCode.x` matches this answer.
    public var syncErrorCode: SyncErrorCode? { error }
}

// MARK: Shared coding

extension KeyedDecodingContainer {
    /// A `UInt64` carried as a decimal string.
    func decodeDecimal(forKey key: Key) throws -> UInt64 {
        let text = try decode(String.self, forKey: key)
        guard let number = UInt64(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: self,
                debugDescription: "expected a decimal string of an unsigned 64-bit number, got \(text)"
            )
        }
        return number
    }
}

extension KeyedDecodingContainer where Key: CodingKey {
    /// `"value": {…}` or `"deleted": true`, exactly one of them; or `"sealed": {…}` with an optional
    /// `"deleted"` (a sealed deletion), never with a value.
    func decodeContent() throws -> (value: PropertyListValue?, sealed: SealedPayload?, deleted: Bool) {
        let valueKey = Key(stringValue: "value")!
        let deletedKey = Key(stringValue: "deleted")!
        let sealedKey = Key(stringValue: "sealed")!
        let value = try decodeIfPresent(PropertyListValue.self, forKey: valueKey)
        let deleted = try decodeIfPresent(Bool.self, forKey: deletedKey) ?? false
        if let sealed = try decodeIfPresent(SealedPayload.self, forKey: sealedKey) {
            guard value == nil else {
                throw DecodingError.dataCorruptedError(forKey: valueKey, in: self, debugDescription: "a sealed entry has no \"value\"")
            }
            return (nil, sealed, deleted)
        }
        switch (value, deleted) {
        case (let value?, false): return (value, nil, false)
        case (nil, true): return (nil, nil, true)
        case (.some, true):
            throw DecodingError.dataCorruptedError(
                forKey: deletedKey,
                in: self,
                debugDescription: "an entry has a value or \"deleted\": true, not both"
            )
        case (nil, false):
            throw DecodingError.keyNotFound(
                valueKey,
                .init(codingPath: codingPath, debugDescription: "an entry needs a \"value\", \"deleted\": true or \"sealed\"")
            )
        }
    }
}

extension KeyedEncodingContainer where Key: CodingKey {
    mutating func encodeContent(_ value: PropertyListValue?, sealed: SealedPayload?, deleted: Bool) throws {
        if let sealed {
            try encode(sealed, forKey: Key(stringValue: "sealed")!)
            if deleted { try encode(true, forKey: Key(stringValue: "deleted")!) }
        } else if let value {
            try encode(value, forKey: Key(stringValue: "value")!)
        } else {
            try encode(true, forKey: Key(stringValue: "deleted")!)
        }
    }
}

/// One version of a key in the server's history: the entry as it was written (value or deletion,
/// stamp, revision) and when the server received it.
///
/// ```json
/// {"key": "sound", "value": {"string": "ring.caf"}, "hlc": "121…", "origin": "998…", "rev": 42,
///  "received": "2026-11-25T09:00:00.000Z"}
/// ```
public struct KeyVersion: Codable, Sendable, Hashable {
    /// The entry as this version wrote it; its `rev` is always present.
    public var entry: SyncEntry
    /// When the server received the write, as a typed-JSON date (`2026-11-25T09:00:00.000Z`).
    public var received: String

    /// A version: `entry` (with its revision) received at `received`.
    public init(entry: SyncEntry, received: String) {
        self.entry = entry
        self.received = received
    }

    enum CodingKeys: String, CodingKey { case received }

    public init(from decoder: any Decoder) throws {
        entry = try SyncEntry(from: decoder)
        received = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .received)
    }

    public func encode(to encoder: any Encoder) throws {
        try entry.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(received, forKey: .received)
    }
}

/// `GET /v1/suites/{suite}/keys/{key}/history`: the versions of one key the server keeps (the last
/// `--history` of them, the current one included), newest first.
public struct KeyHistory: Codable, Sendable, Hashable {
    /// The key.
    public var key: String
    /// Its versions, newest (highest revision) first.
    public var versions: [KeyVersion]

    /// The history of `key`.
    public init(key: String, versions: [KeyVersion]) {
        self.key = key
        self.versions = versions
    }
}

/// `GET /v1/suites/{suite}/history`: a page of the history of every key of the suite, so that
/// reading all of it costs a request per page rather than one per key.
public struct SuiteHistoryPage: Codable, Sendable, Hashable {
    /// Each key the server keeps versions of, in key order (UTF-8 bytes), with its versions newest
    /// first; a key is never split between pages.
    public var history: [KeyHistory]
    /// The key to continue after, or nil on the last page (encoded as `null`).
    public var next: String?

    /// A page of the suite's history; `next` is nil on the last page.
    public init(history: [KeyHistory], next: String?) {
        self.history = history
        self.next = next
    }

    enum CodingKeys: String, CodingKey { case history, next }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(history, forKey: .history)
        try container.encode(next, forKey: .next)  // explicit null on the last page
    }
}

/// One device of an account, as the server saw it: a (token, `device_id`) pair that pushed or pulled.
///
/// ```json
/// {"id": "dev_3f2a…", "name": "tablet", "device_id": "998…", "token_id": "tok_1a2b…",
///  "first_seen": "…", "last_seen": "…", "last_push": "…", "suites": ["group.com.example.chat"],
///  "current": true}
/// ```
public struct DeviceInfo: Codable, Sendable, Hashable {
    /// The device's public id (for `groupdefaults-server devices revoke`).
    public var id: String
    /// The name its token is bound to (`token create --device NAME`); nil for an unbound token.
    public var name: String?
    /// The device's store origin, the `device_id` of its pushes (`device_id`, a decimal string).
    public var deviceID: UInt64
    /// The id of the token it uses (`token_id`).
    public var tokenID: String
    /// When the server first and last saw it, as typed-JSON dates (`first_seen`, `last_seen`).
    public var firstSeen: String
    /// See `firstSeen`.
    public var lastSeen: String
    /// When it last pushed, if ever (`last_push`).
    public var lastPush: String?
    /// The suites it pushed or pulled, by name (only those the asking token covers).
    public var suites: [String]
    /// Whether this is the device that asked (same token and `Device-ID`).
    public var current: Bool
    /// Whether another token of the account used this device id first and still works, and the two
    /// tokens are not bound to one device name (`unverified`): a device names its id itself, so
    /// this one may be a device claiming another's id. A device given a new token bound to the
    /// same name, and the first token seen with an id, are never marked. Absent (false) on the
    /// wire otherwise.
    public var unverified: Bool

    /// A device as `GET /v1/devices` lists it.
    public init(
        id: String,
        name: String?,
        deviceID: UInt64,
        tokenID: String,
        firstSeen: String,
        lastSeen: String,
        lastPush: String?,
        suites: [String],
        current: Bool,
        unverified: Bool = false
    ) {
        self.unverified = unverified
        self.id = id
        self.name = name
        self.deviceID = deviceID
        self.tokenID = tokenID
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.lastPush = lastPush
        self.suites = suites
        self.current = current
    }

    enum CodingKeys: String, CodingKey {
        case id, name
        case deviceID = "device_id"
        case tokenID = "token_id"
        case firstSeen = "first_seen"
        case lastSeen = "last_seen"
        case lastPush = "last_push"
        case suites, current, unverified
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        name = try container.decodeIfPresent(String.self, forKey: .name)
        deviceID = try container.decodeDecimal(forKey: .deviceID)
        tokenID = try container.decode(String.self, forKey: .tokenID)
        firstSeen = try container.decode(String.self, forKey: .firstSeen)
        lastSeen = try container.decode(String.self, forKey: .lastSeen)
        lastPush = try container.decodeIfPresent(String.self, forKey: .lastPush)
        suites = try container.decode([String].self, forKey: .suites)
        current = try container.decode(Bool.self, forKey: .current)
        unverified = try container.decodeIfPresent(Bool.self, forKey: .unverified) ?? false
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encodeIfPresent(name, forKey: .name)
        try container.encode(String(deviceID), forKey: .deviceID)
        try container.encode(tokenID, forKey: .tokenID)
        try container.encode(firstSeen, forKey: .firstSeen)
        try container.encode(lastSeen, forKey: .lastSeen)
        try container.encodeIfPresent(lastPush, forKey: .lastPush)
        try container.encode(suites, forKey: .suites)
        try container.encode(current, forKey: .current)
        if unverified { try container.encode(true, forKey: .unverified) }
    }
}

/// `GET /v1/devices`: the devices of the token's account, most recently seen first.
public struct DeviceList: Codable, Sendable, Hashable {
    /// The devices.
    public var devices: [DeviceInfo]

    /// A list of `devices`.
    public init(devices: [DeviceInfo]) { self.devices = devices }
}

/// The request header in which a client names its device (its store origin, decimal) on every
/// request, so that the server can record the devices that pull as well as push.
public enum DeviceHeader {
    /// `Device-ID`.
    public static let name = "Device-ID"
}

/// The response header in which the server names its storage's incarnation on every `/v1` answer:
/// an opaque id that changes when the operator restores a backup. A device that sees it change
/// uploads what it holds and reads the suite again.
public enum IncarnationHeader {
    /// `Server-Incarnation`.
    public static let name = "Server-Incarnation"
}
