package specdata

import (
	"os"
	"testing"
)

func TestFilesPresent(t *testing.T) {
	for _, rel := range []string{
		"chp/vectors/canon/cases.json",
		"chp/recorded/export-bundle.python-reference-host.hash-chain.json",
		"ecoprimals/signed-announcement-vectors.json",
		"ecoprimals/capability-formats/index.json",
		"ecoprimals/real-responses/rhizocrypt.capabilities.list.json",
		"genesis-mesh/samples/descriptor-01-basic-wss.json",
		"hashing/vectors-from-tests.json",
	} {
		if _, err := os.Stat(Path(rel)); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
}
