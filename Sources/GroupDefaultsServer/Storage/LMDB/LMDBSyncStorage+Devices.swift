import Foundation
import GroupDefaultsLMDB
import GroupDefaultsWire

// Devices: one record per (token, device id), sightings merged into it.
extension LMDBSyncStorage: DeviceStore {
    package func recordDevices(_ sightings: [StoredDevice]) async throws {
        guard !sightings.isEmpty else { return }
        let environment = self.environment
        try await onWriteQueue {
            // Flushed like every commit of the store: a commit left in the page cache can reach the
            // disk meta page first, and a power cut then damages the whole store, not only this
            // record (Tools/powercut-sim --server found it). `DeviceTracker` writes at most once a
            // second, every sighting merged since in this one commit, so the flush costs little.
            try environment.writeTransaction(sync: true) { txn in
                var accounts: [ExactName: String?] = [:]  // each token's account (nil: gone), read once per write
                for sighting in sightings {
                    // A sighting flushed after its account was deleted (or made again) is not written:
                    // its device would be listed with a token that is gone, and could not be revoked.
                    let account =
                        try accounts[sighting.tokenID.exact]
                        ?? Self.get(txn, DB.tokens, Array(sighting.tokenID.utf8)).map {
                            try JSONDecoder().decode(StoredToken.self, from: Data($0)).account
                        }
                    accounts[sighting.tokenID.exact] = account
                    guard let account, account.isSameName(as: sighting.account) else { continue }
                    let key = LMDBKeys.device(sighting.identity)
                    var device = sighting
                    if let stored = try Self.get(txn, DB.devices, key) {
                        device = try JSONDecoder().decode(StoredDevice.self, from: Data(stored)).merged(with: sighting)
                    }
                    try Self.put(txn, DB.devices, key, Array(try JSONEncoder().encode(device)))
                }
            }
        }
    }

    package func devices(account: String?) async throws -> [StoredDevice] {
        let environment = self.environment
        return try await onReadQueue {
            var devices: [StoredDevice] = []
            try environment.readTransaction { txn in
                try txn.forEach(DB.devices) { _, value in
                    let device = try JSONDecoder().decode(StoredDevice.self, from: Data(value))
                    if account.map(device.account.isSameName(as:)) ?? true { devices.append(device) }
                    return true
                }
            }
            return devices.sorted { ($0.lastSeen, $0.id) > ($1.lastSeen, $1.id) }
        }
    }
}
