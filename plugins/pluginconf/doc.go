// Package pluginconf reads a plugin's JSON configuration strictly, for every plugin
// package. A configuration is a JSON object read member by member in document order:
// Members (or Each, which hands each member over as it is read) refuses anything but one
// object, a name given twice (encoding/json would silently keep the last) and trailing
// data; the plugin then switches on Member.Name and reads each value with a Member method
// (Bool, NonEmptyString, PositiveInt, OneOf, ...) that refuses every other JSON type and
// says in its error which field was wrong and what it held. A Style fixes how those
// messages show the offending value: limit-count and prometheus use Compact, the auth
// plugins and proxy-rewrite Verbatim, so that every plugin's messages read as they always
// have. Everything here is pure and safe for concurrent use.
package pluginconf
