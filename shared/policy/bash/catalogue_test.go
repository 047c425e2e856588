package bash

import (
	"sort"
	"strings"
	"testing"
)

// catalogueCases holds, for every catalogue entry, lines that are read-only
// and lines that are not. TestCatalogueEveryEntryTested makes adding an
// entry without its lines fail.
var catalogueCases = map[string]struct{ safe, unsafe []string }{
	"ls":        {[]string{"ls", "ls -la src", "ls -lhtr --color=auto", "ls -I '*.o' -1", "ls -- *.go"}, []string{"ls *", "ls --foo", "ls --col"}},
	"cat":       {[]string{"cat README.md", "cat -n a b"}, []string{"cat -z x", "cat > out"}},
	"head":      {[]string{"head -n 5 f", "head -5 f", "head -c10 f", "head --lines=3 f"}, []string{"head --pid=1 f", "head -x"}},
	"tail":      {[]string{"tail -n 20 log", "tail -3 f"}, []string{"tail -f log", "tail --pid=1 -f log"}},
	"wc":        {[]string{"wc -l a b", "wc -c f"}, []string{"wc --files0-from=list"}},
	"sort":      {[]string{"sort -u f", "sort -k2,2n -t, f", "sort -rn f"}, []string{"sort -o out f", "sort --output=out f", "sort --compress-program=sh f", "sort -T /tmp f", "sort --out=x f", "sort *.txt"}},
	"uniq":      {[]string{"uniq -c f", "uniq"}, []string{"uniq in out", "uniq -c src/*"}},
	"cut":       {[]string{"cut -d: -f1 /etc/passwd", "cut -c1-10 f"}, []string{"cut --foo f"}},
	"tr":        {[]string{"tr a-z A-Z", "tr -d '\\r'"}, []string{"tr a b c"}},
	"stat":      {[]string{"stat f", "stat -c %s f"}, []string{"stat --foo f"}},
	"du":        {[]string{"du -sh .", "du -d 1 src"}, []string{"du --files0-from=f"}},
	"df":        {[]string{"df -h", "df -T /"}, []string{"df --sync"}},
	"pwd":       {[]string{"pwd", "pwd -P"}, []string{"pwd x"}},
	"basename":  {[]string{"basename /a/b.go .go"}, []string{"basename --foo"}},
	"dirname":   {[]string{"dirname /a/b"}, []string{"dirname -x"}},
	"realpath":  {[]string{"realpath -e src", "realpath --relative-to=/a /a/b"}, []string{"realpath --foo x"}},
	"readlink":  {[]string{"readlink -f link"}, []string{"readlink --foo x"}},
	"nl":        {[]string{"nl -ba f"}, []string{"nl --foo f"}},
	"tac":       {[]string{"tac f"}, []string{"tac --foo f"}},
	"rev":       {[]string{"rev f"}, []string{"rev -x f"}},
	"comm":      {[]string{"comm -12 a b"}, []string{"comm a b c"}},
	"paste":     {[]string{"paste -sd, f"}, []string{"paste --foo f"}},
	"fold":      {[]string{"fold -w 80 f"}, []string{"fold --foo f"}},
	"expand":    {[]string{"expand -t 4 f"}, []string{"expand --foo f"}},
	"seq":       {[]string{"seq 1 10", "seq -s, 3"}, []string{"seq 1 2 3 4"}},
	"md5sum":    {[]string{"md5sum f", "md5sum -c sums"}, []string{"md5sum --foo"}},
	"sha1sum":   {[]string{"sha1sum f"}, []string{"sha1sum --foo"}},
	"sha256sum": {[]string{"sha256sum f", "sha256sum --check sums"}, []string{"sha256sum --foo"}},
	"sha512sum": {[]string{"sha512sum f"}, []string{"sha512sum --foo"}},
	"base64":    {[]string{"base64 f", "base64 -d f"}, []string{"base64 a b", "base64 --foo"}},
	"od":        {[]string{"od -An -tx1 f", "od -c f"}, []string{"od --foo f"}},
	"cmp":       {[]string{"cmp a b", "cmp -l a b"}, []string{"cmp --foo a b"}},
	"diff":      {[]string{"diff -u a b", "diff -ru dir1 dir2", "diff --color=always a b"}, []string{"diff -l a b", "diff --paginate a b"}},
	"file":      {[]string{"file f", "file -b --mime-type f"}, []string{"file -C -m magic", "file --compile"}},
	"tree":      {[]string{"tree -L 2", "tree -a -I node_modules src"}, []string{"tree -o out", "tree -R", "tree -H . -o index.html"}},
	"grep":      {[]string{"grep -rn TODO src", "grep -E 'a|b' f", "grep -C3 x f", "grep -5 x f", "grep -e -x f"}, []string{"grep --foo x", "grep x *"}},
	"rg":        {[]string{"rg -n TODO", "rg -g '*.go' -t go x", "rg --files"}, []string{"rg --pre cat x", "rg --pre=cat x", "rg -z x", "rg --search-zip x", "rg --hostname-bin=x y"}},
	"echo":      {[]string{"echo hello", "echo -n --output=x"}, []string{"echo x > f", "echo $(id)"}},
	"printf":    {[]string{"printf '%s\\n' a"}, []string{"printf -v PATH x", "printf x > f"}},
	"true":      {[]string{"true"}, []string{"true > f"}},
	"false":     {[]string{"false"}, []string{"false > f"}},
	"which":     {[]string{"which -a git"}, []string{"which --foo"}},
	"whoami":    {[]string{"whoami"}, []string{"whoami x"}},
	"id":        {[]string{"id -u"}, []string{"id a b"}},
	"uname":     {[]string{"uname -a"}, []string{"uname x"}},
	"nproc":     {[]string{"nproc"}, []string{"nproc x"}},
	"date":      {[]string{"date", "date -u +%F", "date -d yesterday +%s"}, []string{"date 010101012000", "date -s now", "date --set=x"}},
	"sed":       {[]string{"sed -n '1,10p' f", "sed 's/a/b/g' f", "sed -E -e 's|x|y|' -e '/^#/d' f", "sed '$!N;s/\\n/ /' f", "sed -n '/start/,/end/p' f"}, []string{"sed -i 's/a/b/' f", "sed 's/a/b/e' f", "sed 's/a/b/w out' f", "sed 'e id' f", "sed '1w out' f", "sed -f script.sed f", "sed 'r /etc/shadow' f", "sed --in-place s/a/b/ f"}},
	"awk":       {[]string{"awk '{print $1}' f", "awk -F: '{print $1}' /etc/passwd", "awk -v n=1 'NR==n' f"}, []string{"awk 'BEGIN{system(\"id\")}'", "awk '{print > \"out\"}' f", "awk '{print | \"sh\"}' f", "awk -f prog.awk f", "awk 'BEGIN{getline l < \"/etc/shadow\"}'", "awk 'BEGIN{print ENVIRON[\"TOKEN\"]}'", "awk 'BEGIN{f=\"sys\" \"tem\"; @f(\"id\")}'", "awk 'BEGIN{f=sprintf(\"%c%s\",115,\"ystem\"); @f(\"id\")}'"}},
	"gawk":      {[]string{"gawk '{print NF}' f"}, []string{"gawk -l filefuncs 'BEGIN{}'", "gawk -e 'BEGIN{}'"}},
	"mawk":      {[]string{"mawk '{print}' f"}, []string{"mawk -W exec x"}},
	"nawk":      {[]string{"nawk '{print}' f"}, []string{"nawk 'BEGIN{system(\"id\")}'"}},
	"jq":        {[]string{"jq .name package.json", "jq -r '.[] | .id' f", "jq --arg x y '.a == $x' f"}, []string{"jq -f prog.jq f", "jq -n env", "jq -n '$ENV.TOKEN'", "jq --arg a b env f", "jq -n --args '$ENV.TOKEN' a", "jq --jsonargs -n env 1"}},
	"find":      {[]string{"find . -name '*.go'", "find src -type f -mtime -1 -print", "find . -maxdepth 2 \\( -name a -o -name b \\)"}, []string{"find . -exec rm {} ;", "find . -delete", "find . -fprint out", "find . -name *.go", "find . -execdir id ;", "find . -ok id ;", "find . -fls out"}},
	"git":       {[]string{"git --version", "git --no-pager status"}, []string{"git", "git -c core.pager=x log", "git -C /tmp status", "git --git-dir=x status", "git push", "git st"}},

	"git status":        {[]string{"git status", "git status -sb", "git status --porcelain=v2 -uno"}, []string{"git status --foo"}},
	"git diff":          {[]string{"git diff", "git diff --stat HEAD~1", "git diff -U0 --cached", "git diff origin/main...HEAD -- src", "git diff -M50% --name-only"}, []string{"git diff --output=x", "git diff --output x", "git diff --no-index /etc/shadow /dev/null", "git diff --ext-diff", "git diff --textconv", "git diff -U --output=x", "git diff --outp=x"}},
	"git log":           {[]string{"git log --oneline -20", "git log -n 5 --format=%H", "git log -p --follow f", "git log --graph --decorate --all"}, []string{"git log --output=x", "git log --show-signature", "git log --ext-diff -p"}},
	"git show":          {[]string{"git show HEAD", "git show --stat HEAD~2"}, []string{"git show --output=x HEAD", "git show --textconv HEAD"}},
	"git whatchanged":   {[]string{"git whatchanged -3"}, []string{"git whatchanged --output=x"}},
	"git diff-tree":     {[]string{"git diff-tree -r --name-only HEAD"}, []string{"git diff-tree --output=x HEAD"}},
	"git diff-index":    {[]string{"git diff-index --cached HEAD"}, []string{"git diff-index --output=x HEAD"}},
	"git diff-files":    {[]string{"git diff-files --name-only"}, []string{"git diff-files --output=x"}},
	"git rev-list":      {[]string{"git rev-list --count HEAD"}, []string{"git rev-list --output=x HEAD"}},
	"git shortlog":      {[]string{"git shortlog -sn HEAD"}, []string{"git shortlog --output=x"}},
	"git branch":        {[]string{"git branch", "git branch -a -v", "git branch --list 'feat/*'", "git branch --show-current", "git branch --contains HEAD"}, []string{"git branch new", "git branch -D old", "git branch -m a b", "git branch --set-upstream-to=x"}},
	"git tag":           {[]string{"git tag", "git tag -l 'v1.*'", "git tag --points-at HEAD"}, []string{"git tag v2", "git tag -d v1", "git tag -a v2 -m x"}},
	"git rev-parse":     {[]string{"git rev-parse HEAD", "git rev-parse --abbrev-ref HEAD", "git rev-parse --show-toplevel"}, []string{"git rev-parse --foo"}},
	"git ls-files":      {[]string{"git ls-files", "git ls-files -m -o --exclude-standard"}, []string{"git ls-files --with-tree=x --foo"}},
	"git ls-tree":       {[]string{"git ls-tree -r --name-only HEAD"}, []string{"git ls-tree --foo HEAD"}},
	"git cat-file":      {[]string{"git cat-file -p HEAD", "git cat-file -t HEAD"}, []string{"git cat-file --textconv HEAD:f", "git cat-file --filters HEAD:f"}},
	"git blame":         {[]string{"git blame f", "git blame -L 10,20 f"}, []string{"git blame --foo f"}},
	"git annotate":      {[]string{"git annotate f"}, []string{"git annotate --foo f"}},
	"git describe":      {[]string{"git describe --tags --always"}, []string{"git describe --dirty"}},
	"git grep":          {[]string{"git grep -n TODO", "git grep -e x -- '*.go'"}, []string{"git grep -O x", "git grep --open-files-in-pager=vim x", "git grep --textconv x", "git grep --no-index x"}},
	"git merge-base":    {[]string{"git merge-base HEAD origin/main"}, []string{"git merge-base --foo"}},
	"git name-rev":      {[]string{"git name-rev HEAD"}, []string{"git name-rev --foo"}},
	"git for-each-ref":  {[]string{"git for-each-ref --format='%(refname)' refs/heads"}, []string{"git for-each-ref --foo"}},
	"git show-ref":      {[]string{"git show-ref --heads"}, []string{"git show-ref --foo"}},
	"git show-branch":   {[]string{"git show-branch -a"}, []string{"git show-branch --foo"}},
	"git count-objects": {[]string{"git count-objects -vH"}, []string{"git count-objects --foo"}},
	"git check-ignore":  {[]string{"git check-ignore -v f"}, []string{"git check-ignore --foo"}},
	"git check-attr":    {[]string{"git check-attr -a f"}, []string{"git check-attr --foo"}},
	"git cherry":        {[]string{"git cherry -v origin/main"}, []string{"git cherry --foo"}},
	"git version":       {[]string{"git version"}, []string{"git version --foo"}},
	"git config":        {[]string{"git config --get user.name", "git config --list", "git config get user.email"}, []string{"git config user.name x", "git config alias.st push", "git config --edit", "git config set core.fsmonitor x"}},
	"git remote":        {[]string{"git remote", "git remote -v", "git remote get-url origin"}, []string{"git remote add x y", "git remote show origin", "git remote set-url origin x"}},
	"git stash":         {[]string{"git stash list", "git stash show -p"}, []string{"git stash", "git stash pop", "git stash drop"}},
	"git stash list":    {[]string{"git stash list --oneline"}, []string{"git stash list --output=x"}},
	"git stash show":    {[]string{"git stash show --stat"}, []string{"git stash show --output=x"}},
	"git worktree":      {[]string{"git worktree list"}, []string{"git worktree add ../x", "git worktree remove x"}},
	"git worktree list": {[]string{"git worktree list --porcelain"}, []string{"git worktree list --foo"}},
	"git reflog":        {[]string{"git reflog", "git reflog -5"}, []string{"git reflog expire --all", "git reflog delete HEAD@{1}"}},
}

// entryNames lists every entry: programs, git subcommands, nested forms.
func entryNames() []string {
	var names []string
	var walk func(prefix string, e *entry)
	walk = func(prefix string, e *entry) {
		names = append(names, prefix)
		for s, sub := range e.subs {
			walk(prefix+" "+s, sub)
		}
	}
	for name, e := range catalogue() {
		walk(name, e)
	}
	sort.Strings(names)
	return names
}

func TestCatalogueEveryEntryTested(t *testing.T) {
	t.Parallel()
	for _, name := range entryNames() {
		c, ok := catalogueCases[name]
		if !ok || len(c.safe) == 0 || len(c.unsafe) == 0 {
			t.Errorf("catalogue entry %q has no safe and unsafe lines in catalogueCases", name)
		}
	}
	for name := range catalogueCases {
		if !strings.Contains(strings.Join(entryNames(), "\n")+"\n", name+"\n") {
			t.Errorf("catalogueCases has %q, which is not a catalogue entry", name)
		}
	}
}

func TestCatalogue(t *testing.T) {
	t.Parallel()
	for name, c := range catalogueCases {
		for _, line := range c.safe {
			if ok, why := Analyze(line).ReadOnly(); !ok {
				t.Errorf("%s: %q is not read-only (%s), want read-only", name, line, why)
			}
		}
		for _, line := range c.unsafe {
			if ok, _ := Analyze(line).ReadOnly(); ok {
				t.Errorf("%s: %q is read-only, want not", name, line)
			}
		}
	}
}

func TestCatalogueSourcesNamed(t *testing.T) {
	t.Parallel()
	var walk func(e *entry)
	walk = func(e *entry) {
		if e.source == "" {
			t.Errorf("catalogue entry %q names no source", e.name)
		}
		for _, s := range e.subs {
			walk(s)
		}
	}
	for _, e := range catalogue() {
		walk(e)
	}
}
