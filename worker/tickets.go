package worker

import (
	"fmt"
)

// ticketKeySize is what tls.Config.SetSessionTicketKeys takes.
const ticketKeySize = 32

// maxTicketKeys bounds a set from the master, which keeps three.
const maxTicketKeys = 16

// setTicketKeys makes the TLS listeners encrypt and decrypt session tickets (TLS 1.2) and
// PSK identities (TLS 1.3) with the master's keys, the first encrypting, instead of keys
// of this process's own: every worker then resumes every other's sessions. Handshakes in
// progress finish with the keys they started with. A set it cannot use changes nothing.
func (s *certStore) setTicketKeys(raw [][]byte) error {
	keys, err := decodeTicketKeys(raw)
	if err != nil {
		return err
	}
	// The per-ssl configs have no keys of their own, so crypto/tls takes the listener's.
	s.listener.SetSessionTicketKeys(keys)
	return nil
}

func decodeTicketKeys(raw [][]byte) ([][ticketKeySize]byte, error) {
	if len(raw) == 0 || len(raw) > maxTicketKeys {
		return nil, fmt.Errorf("ticket_keys: want 1 to %d keys, got %d", maxTicketKeys, len(raw))
	}
	keys := make([][ticketKeySize]byte, len(raw))
	for i, k := range raw {
		if len(k) != ticketKeySize {
			return nil, fmt.Errorf("ticket_keys item %d: want %d bytes, got %d", i+1, ticketKeySize, len(k))
		}
		copy(keys[i][:], k)
	}
	return keys, nil
}
