import Crypto
package import Foundation
package import GroupDefaultsWire

/// One version of a key as storage keeps it in the history: the entry the write made and when the
/// server received it (milliseconds since 1970).
package struct StoredVersion: Sendable, Hashable {
    package var entry: StoredEntry
    package var receivedMilliseconds: UInt64

    package init(entry: StoredEntry, receivedMilliseconds: UInt64) {
        self.entry = entry
        self.receivedMilliseconds = receivedMilliseconds
    }

    /// The version as the wire carries it.
    ///
    /// - Throws: `SyncStorageError.unavailable` if the stored JSON does not decode.
    package func keyVersion() throws(SyncStorageError) -> KeyVersion {
        KeyVersion(entry: try entry.syncEntry(), received: TypedJSONDate.format(milliseconds: receivedMilliseconds))
    }
}

extension PushStep.Applied {
    /// The versions the history keeps of this push: per key, the last `depth` it made (older ones
    /// would be trimmed at once), in revision order.
    package func historyVersions(depth: Int) -> [StoredEntry] {
        guard depth > 0 else { return [] }
        var perKey: [ExactName: Int] = [:]  // keys as bytes: `café` and `cafe\u{301}` are two keys
        var kept: [StoredEntry] = []
        for version in versions.reversed() {
            let count = perKey[version.key.exact, default: 0]
            guard count < depth else { continue }
            perKey[version.key.exact] = count + 1
            kept.append(version)
        }
        return kept.reversed()
    }
}

/// A device of an account as storage keeps it: one (token, device id) pair that pushed or pulled.
/// Times are milliseconds since 1970.
package struct StoredDevice: Sendable, Hashable, Codable {
    package var account: String
    package var tokenID: String
    /// The name the token is bound to, if any.
    package var name: String?
    package var deviceID: UInt64
    package var firstSeen: UInt64
    package var lastSeen: UInt64
    package var lastPush: UInt64?
    /// Sorted, without repeats.
    package var suites: [String]

    package init(
        account: String,
        tokenID: String,
        name: String?,
        deviceID: UInt64,
        firstSeen: UInt64,
        lastSeen: UInt64,
        lastPush: UInt64?,
        suites: [String]
    ) {
        self.account = account
        self.tokenID = tokenID
        self.name = name
        self.deviceID = deviceID
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.lastPush = lastPush
        self.suites = Self.union(suites, [])
    }

    /// What makes a device one: its account, token and device id. Storage keys records by it.
    package struct Identity: Sendable, Hashable {
        package var account: String
        package var tokenID: String
        package var deviceID: UInt64

        /// By the account's bytes (`ExactName`): two spellings of one text are two accounts.
        package static func == (a: Identity, b: Identity) -> Bool {
            a.account.isSameName(as: b.account) && a.tokenID == b.tokenID && a.deviceID == b.deviceID
        }
        package func hash(into hasher: inout Hasher) {
            hasher.combine(account.exact)
            hasher.combine(tokenID)
            hasher.combine(deviceID)
        }
    }

    package var identity: Identity { Identity(account: account, tokenID: tokenID, deviceID: deviceID) }

    /// The device's public id, for people and `devices revoke`: derived from its identity (48 bits
    /// of a SHA-256), so that every server instance names a device alike.
    package var id: String { Self.id(account: account, tokenID: tokenID, deviceID: deviceID) }

    package static func id(account: String, tokenID: String, deviceID: UInt64) -> String {
        "dev_" + Hex.string(SHA256.hash(data: Array("\(account)\u{0}\(tokenID)\u{0}\(deviceID)".utf8)).prefix(6))
    }

    /// This record with `sighting` of the same device (`identity`) merged in (the rule every
    /// backend applies).
    package func merged(with sighting: StoredDevice) -> StoredDevice {
        precondition(sighting.identity == identity, "a sighting merged into another device's record")
        var merged = self
        merged.name = sighting.name ?? name
        merged.firstSeen = min(firstSeen, sighting.firstSeen)
        merged.lastSeen = max(lastSeen, sighting.lastSeen)
        merged.lastPush = [lastPush, sighting.lastPush].compactMap { $0 }.max()
        merged.suites = Self.union(suites, sighting.suites)
        return merged
    }

    /// The suites of `a` and `b`, each name once by its bytes (`ExactName`), in byte order.
    static func union(_ a: [String], _ b: [String]) -> [String] {
        let names: Set<ExactName> = Set((a + b).map { ExactName($0) })
        return names.sorted().map(\.text)
    }

    /// The device as `GET /v1/devices` lists it, showing only `visibleSuites`; `unverified` when
    /// another live token of another device used its device id first (`unverified(among:)`).
    package func info(current: Bool, unverified: Bool = false, visibleSuites: (String) -> Bool) -> DeviceInfo {
        DeviceInfo(
            id: id,
            name: name,
            deviceID: deviceID,
            tokenID: tokenID,
            firstSeen: TypedJSONDate.format(milliseconds: firstSeen),
            lastSeen: TypedJSONDate.format(milliseconds: lastSeen),
            lastPush: lastPush.map(TypedJSONDate.format(milliseconds:)),
            suites: suites.filter(visibleSuites),
            current: current,
            unverified: unverified
        )
    }

    /// Of `devices`, those whose claim to their device id is unverified, each with the record that
    /// makes it so. A device names its id itself (the `device_id` of its pushes, its `Device-ID`
    /// header), so a token can claim another device's id; the mark tells such a claim from a device
    /// that was given a new token (a token swap: `configure` with a new token file, a token
    /// renewed). Per account and device id, in the order the records were first seen (then by
    /// token id), a record is unverified when an earlier record of another token stands against
    /// it: that token still works (it is in `activeTokens`), and the two are not bound to one
    /// device name (by bytes; a token bound to none is another device for all the server can
    /// tell). So the first token seen with an id is never marked (it was first, revoked or not); a
    /// new token of the same device, bound to the same name, is not marked; nor is any token once
    /// the earlier ones no longer work; a second live token bound to another name (or to none)
    /// that claims the id is, for as long as the earlier one works. The one rule for both
    /// storage backends, the API and `devices list`.
    package static func unverified(among devices: [StoredDevice], activeTokens: Set<String>) -> [Identity: StoredDevice] {
        let byID = Dictionary(grouping: devices) { [$0.account.exact, ExactName(String($0.deviceID))] }
        var marked: [Identity: StoredDevice] = [:]
        for group in byID.values where group.count > 1 {
            let ordered = group.sorted { ($0.firstSeen, $0.tokenID) < ($1.firstSeen, $1.tokenID) }
            for (index, device) in ordered.enumerated() {
                let against = ordered[..<index].first { earlier in
                    earlier.tokenID != device.tokenID && activeTokens.contains(earlier.tokenID) && !earlier.isBoundToSameName(as: device)
                }
                if let against { marked[device.identity] = against }
            }
        }
        return marked
    }

    /// Whether both records' tokens are bound to one device name (by bytes).
    private func isBoundToSameName(as other: StoredDevice) -> Bool {
        guard let name, let otherName = other.name else { return false }
        return name.isSameName(as: otherName)
    }
}

/// What revoking a device by its public id found (`DeviceStore.revokeDevice`).
package enum DeviceRevocation: Sendable {
    /// The device's token was revoked; `sharing` are the other devices on that token, which lose
    /// access too.
    case revoked(StoredDevice, sharing: [StoredDevice])
    /// No device has the id.
    case notFound
    /// Several devices have the id (48 bits of a digest): none was revoked.
    case ambiguous([StoredDevice])
}

extension DeviceStore where Self: TokenStore {
    /// Revokes the token of the device `id`, looked for among `account`'s devices (every
    /// account's, for nil): the rule `devices revoke` and the console share. A device is revoked
    /// through its token, so every device sharing the token loses access with it.
    package func revokeDevice(id: String, account: String?, at date: Date) async throws -> DeviceRevocation {
        let devices = try await devices(account: account)
        let matching = devices.filter { $0.id == id }
        guard let device = matching.first else { return .notFound }
        guard matching.count == 1 else { return .ambiguous(matching) }
        try await revokeToken(id: device.tokenID, at: date)
        return .revoked(device, sharing: devices.filter { $0.tokenID == device.tokenID && $0.id != id })
    }
}
