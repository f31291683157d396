public import GroupDefaults

/// Mirrors one suite to a `groupdefaults-server` (placeholder while the engine is written).
public final class SyncEngine: Sendable {}
