package postgres_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestOpen_ServerProbesTheConnections: the server finds a replica's connection dead
// about a minute after its machine went, not after the operating system's two hours
// and more, during which the transaction it had open would hold the locks of its keys;
// a setting the URL gives is kept.
func TestOpen_ServerProbesTheConnections(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	for _, tc := range []struct {
		name, params string
		want         map[string]string
	}{
		{"defaults", "", map[string]string{"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3"}},
		{"idle set by the URL", "&tcp_keepalives_idle=7", map[string]string{"tcp_keepalives_idle": "7", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3"}},
	} {
		db := open(t, url+tc.params)
		for name, want := range tc.want {
			got, err := postgres.ShowSetting(t.Context(), db, name)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: %s = %s, want %s", tc.name, name, got, want)
			}
		}
	}
}

// TestOpen_ServerProbesKeepTheOperatorsSettings: a probe setting the operator gave
// elsewhere than as a parameter of the URL is kept too: in its options, spelled with
// the dashes and capitals PostgreSQL takes there, or for the database (ALTER DATABASE …
// SET), as a role's or the server's configuration would be.
func TestOpen_ServerProbesKeepTheOperatorsSettings(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	conn := postgrestest.Connect(t, url)
	if _, err := conn.Exec(t.Context(), `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET tcp_keepalives_count = 5', current_database()); END $$`); err != nil {
		t.Fatal(err)
	}
	db := open(t, url+"&options=-c%20tcp-keepalives-idle%3D7%20-c%20TCP_KEEPALIVES_INTERVAL%3D4")
	for name, want := range map[string]string{"tcp_keepalives_idle": "7", "tcp_keepalives_interval": "4", "tcp_keepalives_count": "5"} {
		got, err := postgres.ShowSetting(t.Context(), db, name)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}
