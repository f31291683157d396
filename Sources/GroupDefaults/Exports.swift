// The values a suite stores (`PropertyListValue`) and the clock stamps an app sees in changes
// (`HLC`, `Stamp`) live in GroupDefaultsWire, which the server shares without the core. An app's
// `import GroupDefaults` brings these three, and not the sync protocol's requests, responses and
// parsers: a program that speaks the protocol itself imports GroupDefaultsWire.
@_exported public import struct GroupDefaultsWire.HLC
@_exported public import enum GroupDefaultsWire.PropertyListValue
@_exported public import struct GroupDefaultsWire.Stamp
