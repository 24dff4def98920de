package worker

// h2AllocsPerRequest is what TestHTTP2RequestAllocs allows: the one allocation left is the
// Framer's, which makes a new HeadersFrame for every HEADERS frame it reads (it caches
// DataFrames only). Reading HEADERS with gw's own parser of the 9-byte frame header would
// take it away; the HPACK decoder allocates nothing for fields the client indexed, as
// h2load, curl and browsers do for every field that repeats.
const h2AllocsPerRequest = 1
