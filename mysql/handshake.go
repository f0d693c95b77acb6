package mysql

import (
	"bytes"
	"encoding/binary"
)

// Handshake is the server greeting (Protocol::HandshakeV10).
type Handshake struct {
	ServerVersion string
	ConnectionID  uint32
	Salt          []byte // 20 bytes of scramble
	Capabilities  uint32
	// ExtCapabilities are MariaDB's extended capabilities
	// (MariaDBClientExtendedMetadata ...), sent and read only without
	// ClientLongPassword (CLIENT_MYSQL) in Capabilities.
	ExtCapabilities uint32
	Charset         byte
	Status          uint16
	AuthPlugin      string
}

// AppendHandshake appends a HandshakeV10 payload.
func AppendHandshake(b []byte, h *Handshake) []byte {
	b = append(b, ProtocolVersion)
	b = append(b, h.ServerVersion...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, h.ConnectionID)
	b = append(b, h.Salt[:8]...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(h.Capabilities))
	b = append(b, h.Charset)
	b = binary.LittleEndian.AppendUint16(b, h.Status)
	b = binary.LittleEndian.AppendUint16(b, uint16(h.Capabilities>>16))
	b = append(b, byte(len(h.Salt)+1))
	b = append(b, make([]byte, 6)...)
	ext := h.ExtCapabilities
	if h.Capabilities&ClientLongPassword != 0 {
		ext = 0
	}
	b = binary.LittleEndian.AppendUint32(b, ext)
	b = append(b, h.Salt[8:]...)
	b = append(b, 0)
	b = append(b, h.AuthPlugin...)
	return append(b, 0)
}

// ParseHandshake decodes a HandshakeV10 payload (the proxy as a client).
func ParseHandshake(p []byte) (*Handshake, error) {
	if len(p) > 0 && p[0] == ErrHeader {
		return nil, ParseErr(p)
	}
	r := reader{b: p}
	if r.byte1() != ProtocolVersion {
		return nil, NewError(ErHandshake, "unsupported handshake protocol version")
	}
	h := &Handshake{}
	h.ServerVersion = string(r.nulString())
	h.ConnectionID = r.uint32()
	salt := append([]byte(nil), r.bytes(8)...)
	r.byte1()
	h.Capabilities = uint32(r.uint16())
	if !r.ok() {
		return nil, ErrBadPacket
	}
	if r.more() {
		h.Charset = r.byte1()
		h.Status = r.uint16()
		h.Capabilities |= uint32(r.uint16()) << 16
		authLen := int(r.byte1())
		r.bytes(6)
		if ext := r.uint32(); h.Capabilities&ClientLongPassword == 0 {
			h.ExtCapabilities = ext
		}
		if h.Capabilities&ClientSecureConnection != 0 {
			// auth-plugin-data-part-2 is MAX(13, auth_plugin_data_len - 8)
			// bytes, the last of which is a NUL terminator.
			n := max(13, authLen-8)
			part := r.bytes(n)
			part = bytes.TrimRight(part, "\x00")
			salt = append(salt, part...)
		}
		if h.Capabilities&ClientPluginAuth != 0 {
			h.AuthPlugin = string(r.nulStringOrEOF())
		}
	}
	if !r.ok() {
		return nil, ErrBadPacket
	}
	h.Salt = salt
	return h, nil
}

// HandshakeResponse is the client's reply to the greeting
// (Protocol::HandshakeResponse41).
type HandshakeResponse struct {
	Capabilities uint32
	// ExtCapabilities are MariaDB's extended capabilities, read and sent
	// only without ClientLongPassword (CLIENT_MYSQL) in Capabilities.
	ExtCapabilities uint32
	MaxPacket       uint32
	Charset         byte
	User            string
	AuthResponse    []byte
	Database        string
	AuthPlugin      string
	Attrs           map[string]string
}

// ParseHandshakeResponse decodes a HandshakeResponse41 payload. An SSL
// request (a 32-byte packet with CLIENT_SSL) is reported as an error because
// the proxy does not offer TLS.
func ParseHandshakeResponse(p []byte) (*HandshakeResponse, error) {
	r := reader{b: p}
	hr := &HandshakeResponse{}
	hr.Capabilities = r.uint32()
	if !r.ok() || hr.Capabilities&ClientProtocol41 == 0 {
		return nil, NewError(ErHandshake, "Bad handshake: clients without CLIENT_PROTOCOL_41 are not supported")
	}
	hr.MaxPacket = r.uint32()
	hr.Charset = r.byte1()
	r.bytes(19)
	if ext := r.uint32(); hr.Capabilities&ClientLongPassword == 0 {
		hr.ExtCapabilities = ext
	}
	if !r.ok() {
		return nil, ErrBadPacket
	}
	if hr.Capabilities&ClientSSL != 0 && !r.more() {
		return nil, NewError(ErHandshake, "Bad handshake: SSL is not supported by this proxy")
	}
	hr.User = string(r.nulString())
	switch {
	case hr.Capabilities&ClientPluginAuthLenencClientData != 0:
		hr.AuthResponse = append([]byte(nil), r.lenEncBytes()...)
	case hr.Capabilities&ClientSecureConnection != 0:
		n := int(r.byte1())
		hr.AuthResponse = append([]byte(nil), r.bytes(n)...)
	default:
		hr.AuthResponse = append([]byte(nil), r.nulString()...)
	}
	if !r.ok() {
		return nil, ErrBadPacket
	}
	if hr.Capabilities&ClientConnectWithDB != 0 && r.more() {
		hr.Database = string(r.nulStringOrEOF())
	}
	if hr.Capabilities&ClientPluginAuth != 0 && r.more() {
		hr.AuthPlugin = string(r.nulStringOrEOF())
	}
	if hr.Capabilities&ClientConnectAttrs != 0 && r.more() {
		total := r.lenEncInt()
		attrs := r.bytes(int(total))
		if !r.ok() || total > uint64(len(p)) {
			return nil, ErrBadPacket
		}
		hr.Attrs = map[string]string{}
		ar := reader{b: attrs}
		for ar.more() {
			k := ar.lenEncBytes()
			v := ar.lenEncBytes()
			if !ar.ok() {
				return nil, ErrBadPacket
			}
			hr.Attrs[string(k)] = string(v)
		}
	}
	if !r.ok() {
		return nil, ErrBadPacket
	}
	return hr, nil
}

// AppendHandshakeResponse appends a HandshakeResponse41 payload (the proxy
// as a client). The auth response is length-encoded when the capability
// allows it.
func AppendHandshakeResponse(b []byte, hr *HandshakeResponse) []byte {
	b = binary.LittleEndian.AppendUint32(b, hr.Capabilities)
	b = binary.LittleEndian.AppendUint32(b, hr.MaxPacket)
	b = appendReserved(b, hr.Charset, hr.Capabilities, hr.ExtCapabilities)
	b = append(b, hr.User...)
	b = append(b, 0)
	if hr.Capabilities&ClientPluginAuthLenencClientData != 0 {
		b = AppendLenEncBytes(b, hr.AuthResponse)
	} else {
		b = append(b, byte(len(hr.AuthResponse)))
		b = append(b, hr.AuthResponse...)
	}
	if hr.Capabilities&ClientConnectWithDB != 0 {
		b = append(b, hr.Database...)
		b = append(b, 0)
	}
	if hr.Capabilities&ClientPluginAuth != 0 {
		b = append(b, hr.AuthPlugin...)
		b = append(b, 0)
	}
	if hr.Capabilities&ClientConnectAttrs != 0 {
		var a []byte
		for k, v := range hr.Attrs {
			a = AppendLenEncString(a, k)
			a = AppendLenEncString(a, v)
		}
		b = AppendLenEncBytes(b, a)
	}
	return b
}

// AppendAuthSwitch appends an AuthSwitchRequest payload.
func AppendAuthSwitch(b []byte, plugin string, data []byte) []byte {
	b = append(b, AuthSwitch)
	b = append(b, plugin...)
	b = append(b, 0)
	b = append(b, data...)
	return append(b, 0)
}

// ParseAuthSwitch decodes an AuthSwitchRequest payload.
func ParseAuthSwitch(p []byte) (plugin string, data []byte, err error) {
	r := reader{b: p}
	if r.byte1() != AuthSwitch {
		return "", nil, ErrBadPacket
	}
	plugin = string(r.nulString())
	if !r.ok() {
		return "", nil, ErrBadPacket
	}
	data = bytes.TrimRight(r.rest(), "\x00")
	return plugin, append([]byte(nil), data...), nil
}

// AppendChangeUser appends a COM_CHANGE_USER payload for a connection with
// the given capabilities (connection attributes are not sent).
func AppendChangeUser(b []byte, cu *ChangeUser, caps uint32) []byte {
	b = append(b, ComChangeUser)
	b = append(b, cu.User...)
	b = append(b, 0)
	if caps&ClientSecureConnection != 0 {
		b = append(b, byte(len(cu.AuthResponse)))
		b = append(b, cu.AuthResponse...)
	} else {
		b = append(b, cu.AuthResponse...)
		b = append(b, 0)
	}
	b = append(b, cu.Database...)
	b = append(b, 0)
	b = append(b, byte(cu.Charset), byte(cu.Charset>>8))
	if caps&ClientPluginAuth != 0 {
		b = append(b, cu.AuthPlugin...)
		b = append(b, 0)
	}
	return b
}

// ChangeUser is a decoded COM_CHANGE_USER payload.
type ChangeUser struct {
	User         string
	AuthResponse []byte
	Database     string
	Charset      uint16
	AuthPlugin   string
}

// ParseChangeUser decodes a COM_CHANGE_USER payload sent by a client with the
// given capabilities.
func ParseChangeUser(p []byte, caps uint32) (*ChangeUser, error) {
	r := reader{b: p}
	if r.byte1() != ComChangeUser {
		return nil, ErrBadPacket
	}
	cu := &ChangeUser{}
	cu.User = string(r.nulString())
	if caps&ClientSecureConnection != 0 {
		n := int(r.byte1())
		cu.AuthResponse = append([]byte(nil), r.bytes(n)...)
	} else {
		cu.AuthResponse = append([]byte(nil), r.nulString()...)
	}
	if !r.ok() {
		return nil, ErrBadPacket
	}
	cu.Database = string(r.nulStringOrEOF())
	if r.more() {
		cu.Charset = r.uint16()
		if caps&ClientPluginAuth != 0 && r.more() {
			cu.AuthPlugin = string(r.nulStringOrEOF())
		}
		// Connection attributes may follow; the proxy does not need them.
	}
	if !r.ok() {
		return nil, ErrBadPacket
	}
	return cu, nil
}

// SSLRequestLen is the length of an SSLRequest packet: capabilities (with
// CLIENT_SSL), max packet size, collation and 23 reserved bytes. A client
// sends it instead of the handshake response, upgrades the connection to
// TLS, then sends the response inside TLS.
const SSLRequestLen = 32

// AppendSSLRequest appends an SSLRequest payload; ext are MariaDB's
// extended capabilities (sent without ClientLongPassword in caps).
func AppendSSLRequest(b []byte, caps, ext uint32, coll byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, caps|ClientSSL)
	b = binary.LittleEndian.AppendUint32(b, MaxPacketPayload)
	return appendReserved(b, coll, caps, ext)
}

// appendReserved appends a handshake response's collation and its 23
// reserved bytes, the last 4 of which are MariaDB's extended capabilities
// when caps lacks ClientLongPassword (CLIENT_MYSQL).
func appendReserved(b []byte, coll byte, caps, ext uint32) []byte {
	b = append(b, coll)
	b = append(b, make([]byte, 19)...)
	if caps&ClientLongPassword != 0 {
		ext = 0
	}
	return binary.LittleEndian.AppendUint32(b, ext)
}

// IsSSLRequest reports whether a client's first packet is an SSLRequest.
func IsSSLRequest(p []byte) bool {
	return len(p) == SSLRequestLen && binary.LittleEndian.Uint32(p)&ClientSSL != 0
}
