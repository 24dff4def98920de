package conf

import "testing"

func TestParseSecretRef(t *testing.T) {
	cases := []struct {
		in      string
		isRef   bool
		want    SecretRef
		wantErr string
	}{
		{"plain-key", false, SecretRef{}, ""},
		{"", false, SecretRef{}, ""},
		{"env://NAME", false, SecretRef{}, ""},
		{"$env:/NAME", false, SecretRef{}, ""},
		{"x$env://NAME", false, SecretRef{}, ""},
		{"$env://NAME", true, SecretRef{Env: "NAME"}, ""},
		{"$ENV://NAME", true, SecretRef{Env: "NAME"}, ""},
		{"$Env://_a1", true, SecretRef{Env: "_a1"}, ""},
		{"$env://CREDS/key", true, SecretRef{Env: "CREDS", Member: "key"}, ""},
		{"$env://CREDS/a/b", true, SecretRef{Env: "CREDS", Member: "a/b"}, ""},
		{"$env://", true, SecretRef{}, `"$env://": the name after $env:// must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got ""`},
		{"$env://1A", true, SecretRef{}, `"$env://1A": the name after $env:// must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got "1A"`},
		{"$env://A-B", true, SecretRef{}, `"$env://A-B": the name after $env:// must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got "A-B"`},
		{"$env://A=B", true, SecretRef{}, `"$env://A=B": the name after $env:// must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got "A=B"`},
		{"$env://A/", true, SecretRef{}, `"$env://A/": a "/" after the variable's name must be followed by the member to take from its JSON value`},
		{"$secret://vault/1/key", true, SecretRef{}, errSecretManager.Error()},
		{"$SECRET://vault/1/key", true, SecretRef{}, errSecretManager.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			if got := IsSecretRef(tc.in); got != tc.isRef {
				t.Errorf("IsSecretRef = %v, want %v", got, tc.isRef)
			}
			ref, isRef, err := ParseSecretRef(tc.in)
			switch {
			case isRef != tc.isRef:
				t.Errorf("isRef = %v, want %v", isRef, tc.isRef)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("err = %v, want %s", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case ref != tc.want:
				t.Errorf("ref = %+v, want %+v", ref, tc.want)
			}
		})
	}
}

func TestSecretRefResolve(t *testing.T) {
	env := map[string]string{
		"KEY":     "s3cret",
		"EMPTY":   "",
		"BAD":     "a\xffb",
		"CREDS":   `{"key":"from-json","n":1,"empty":""}`,
		"NOTJSON": "plain",
	}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	cases := []struct {
		ref    SecretRef
		want   string
		wantOK bool
	}{
		{SecretRef{Env: "KEY"}, "s3cret", true},
		{SecretRef{Env: "UNSET"}, "", false},
		{SecretRef{Env: "EMPTY"}, "", false},
		{SecretRef{Env: "BAD"}, "", false},
		{SecretRef{Env: "CREDS", Member: "key"}, "from-json", true},
		{SecretRef{Env: "CREDS", Member: "missing"}, "", false},
		{SecretRef{Env: "CREDS", Member: "n"}, "", false},
		{SecretRef{Env: "CREDS", Member: "empty"}, "", false},
		{SecretRef{Env: "NOTJSON", Member: "key"}, "", false},
		{SecretRef{Env: "UNSET", Member: "key"}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.ref.String(), func(t *testing.T) {
			got, ok := tc.ref.Resolve(lookup)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("Resolve = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
