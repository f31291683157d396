import Foundation
import GroupDefaultsLMDB
import GroupDefaultsWire

// Devices: one record per (token, device id), sightings merged into it.
extension LMDBSyncStorage: DeviceStore {
    package func recordDevice(_ sighting: StoredDevice) async throws {
        let environment = self.environment
        try await onWriteQueue {
            // Not flushed by itself: a device record is bookkeeping, made durable by the next
            // flushed commit (a push), and a crash loses at most a last-seen time.
            try environment.writeTransaction(sync: false) { txn in
                let key = LMDBKeys.device(sighting.identity)
                var device = sighting
                if let stored = try Self.get(txn, DB.devices, key) {
                    device = try JSONDecoder().decode(StoredDevice.self, from: Data(stored)).merged(with: sighting)
                }
                try Self.put(txn, DB.devices, key, Array(try JSONEncoder().encode(device)))
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
                    if account == nil || device.account == account { devices.append(device) }
                    return true
                }
            }
            return devices.sorted { ($0.lastSeen, $0.id) > ($1.lastSeen, $1.id) }
        }
    }
}
