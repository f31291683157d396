// The values a suite stores (`PropertyListValue`), their typed JSON, HLCs and stamps, and the sync
// protocol's types live in GroupDefaultsWire, which the server shares without the core; every
// program that imports GroupDefaults sees them as part of it.
@_exported public import GroupDefaultsWire
