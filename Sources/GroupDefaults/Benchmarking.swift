internal import GroupDefaultsLMDB

/// Facts the benchmark needs to run raw LMDB exactly as the store does. Not API.
extension SharedDefaults {
    /// The LMDB environment flags a suite's commits run with under `configuration`.
    @_spi(Benchmarking)
    public static func lmdbEnvironmentFlags(for configuration: Configuration) -> UInt32 {
        configuration.durability == .fsyncEveryCommit ? Environment.flags & ~Environment.noSyncFlag : Environment.flags
    }
}
