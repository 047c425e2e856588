package infra

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/githubapp"
)

// The AWS launcher's resources (template.yaml, "The AWS launcher"), each
// created only with Launcher aws.
const (
	launchStateMachine = "LaunchStateMachine"
	launchFunction     = "LaunchFunction"
)

var launcherResources = map[string]string{
	"LaunchRule":           "AWS::Events::Rule",
	"LaunchRuleRole":       "AWS::IAM::Role",
	launchFunction:         "AWS::Serverless::Function",
	launchStateMachine:     "AWS::Serverless::StateMachine",
	"RunnerCluster":        "AWS::ECS::Cluster",
	"RunnerLogGroup":       "AWS::Logs::LogGroup",
	"RunnerTaskDefinition": "AWS::ECS::TaskDefinition",
	"RunnerTaskRole":       "AWS::IAM::Role",
	"RunnerExecutionRole":  "AWS::IAM::Role",
	"RunnerSecurityGroup":  "AWS::EC2::SecurityGroup",
}

const launchSecrets = "SUB:arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:${AWS::StackName}/launch/*"

// grant is one Allow statement as "action resource" lines, with its
// condition, for exact comparison.
func grants(t *testing.T, sts []statement) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, st := range sts {
		if st.fields["Effect"] != "Allow" {
			t.Errorf("%s: Effect %v; the launcher's roles only allow", st.where, st.fields["Effect"])
			continue
		}
		cond, _ := json.Marshal(st.fields["Condition"])
		for _, a := range asStrings(st.fields["Action"]) {
			for _, r := range asStrings(st.fields["Resource"]) {
				key := a + " " + r
				if _, dup := out[key]; dup {
					t.Errorf("%s: %s granted twice", st.where, key)
				}
				out[key] = string(cond)
			}
		}
	}
	return out
}

// roleStatements are an AWS::IAM::Role's inline statements.
func roleStatements(t *testing.T, id string, role map[string]any) []statement {
	t.Helper()
	var out []statement
	if props(role)["ManagedPolicyArns"] != nil {
		t.Errorf("%s: ManagedPolicyArns hide their actions; write inline statements", id)
	}
	for i, p := range asList(props(role)["Policies"]) {
		sts, err := statementsOf(fmt.Sprintf("%s.Policies[%d]", id, i), p["PolicyDocument"])
		if err != nil {
			t.Error(err)
			continue
		}
		out = append(out, sts...)
	}
	return out
}

// TestLauncherResourcesAreConditional: every launcher resource exists, of
// its type, only with Launcher aws (the default, none, creates none of
// them); every role created with it is one this file checks.
func TestLauncherResourcesAreConditional(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	all, _ := l.doc["Resources"].(map[string]any)
	for _, id := range sortedKeys(launcherResources) {
		r, _ := all[id].(map[string]any)
		if r == nil || r["Type"] != launcherResources[id] {
			t.Errorf("%s: %v, want a %s", id, r["Type"], launcherResources[id])
			continue
		}
		if r["Condition"] != "LaunchOnAws" {
			t.Errorf("%s: Condition = %v, want LaunchOnAws", id, r["Condition"])
		}
	}
	for id, r := range all {
		m, _ := r.(map[string]any)
		if m["Condition"] == "LaunchOnAws" && launcherResources[id] == "" {
			t.Errorf("%s is created with the launcher but not held by infra/launch_test.go", id)
		}
	}
	if got := dig(l.doc, "Conditions", "LaunchOnAws", "Fn::Equals"); fmt.Sprint(got) != "[REF:Launcher aws]" {
		t.Errorf("Conditions.LaunchOnAws = %v, want Launcher equals aws", got)
	}
	p, _ := dig(l.doc, "Parameters", "Launcher").(map[string]any)
	if p["Default"] != "none" || !slices.Equal(asStrings(p["AllowedValues"]), []string{"none", "aws"}) {
		t.Errorf("Parameters.Launcher = %v, want none (default) or aws", p)
	}
}

// TestLaunchRule: session.created of a triggered run on the stack's bus,
// to the state machine, through a role that may start it and nothing else.
func TestLaunchRule(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	rule := props(resources(l.doc, "AWS::Events::Rule")["LaunchRule"])
	if rule["EventBusName"] != "REF:EventBus" {
		t.Errorf("LaunchRule.EventBusName = %v, want the stack's bus", rule["EventBusName"])
	}
	pattern, _ := json.Marshal(rule["EventPattern"])
	if want := `{"detail":{"trigger":[{"anything-but":["manual"]}]},"detail-type":["session.created"],"source":["fluidbox"]}`; string(pattern) != want {
		t.Errorf("LaunchRule.EventPattern = %s, want %s", pattern, want)
	}
	targets := asList(rule["Targets"])
	if len(targets) != 1 || targets[0]["Arn"] != "REF:"+launchStateMachine || targets[0]["RoleArn"] != "GETATT:LaunchRuleRole.Arn" ||
		targets[0]["Input"] != nil || targets[0]["InputTransformer"] != nil {
		t.Errorf("LaunchRule.Targets = %v, want the whole event to LaunchStateMachine as LaunchRuleRole", targets)
	}
	role := resources(l.doc, "AWS::IAM::Role")["LaunchRuleRole"]
	checkTrust(t, "LaunchRuleRole", role, "events.amazonaws.com")
	want := map[string]string{"states:StartExecution REF:" + launchStateMachine: "null"}
	if got := grants(t, roleStatements(t, "LaunchRuleRole", role)); !equalMaps(got, want) {
		t.Errorf("LaunchRuleRole grants %v, want %v", got, want)
	}
}

// checkTrust: the role is assumed by service alone, and only for this
// account (a confused deputy elsewhere cannot use it).
func checkTrust(t *testing.T, id string, role map[string]any, service string) {
	t.Helper()
	sts, err := statementsOf(id+".AssumeRolePolicyDocument", props(role)["AssumeRolePolicyDocument"])
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 1 {
		t.Fatalf("%s: %d trust statements, want 1", id, len(sts))
	}
	f := sts[0].fields
	if f["Effect"] != "Allow" || f["Action"] != "sts:AssumeRole" || dig(f, "Principal", "Service") != service ||
		dig(f, "Condition", "StringEquals", "aws:SourceAccount") != "REF:AWS::AccountId" {
		t.Errorf("%s trust = %v, want sts:AssumeRole by %s for this account only", id, f, service)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestLauncherRolesLeastPrivilege holds every grant of the launcher's
// roles, exactly: the runner's task may read and delete launch secrets and
// nothing else (no logs: the execution role ships them; no table, no KMS);
// the execution role pulls the one repository and writes the one log
// group; the launch function creates and deletes launch secrets (never
// reads them), does a launch's, an end's and a report's table work, which
// the runner tests run under this role (roles.Enforce), and opens the
// GitHub App's key alone, in its role and in the key's policy.
func TestLauncherRolesLeastPrivilege(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	roles := resources(l.doc, "AWS::IAM::Role")
	checkTrust(t, "RunnerTaskRole", roles["RunnerTaskRole"], "ecs-tasks.amazonaws.com")
	checkTrust(t, "RunnerExecutionRole", roles["RunnerExecutionRole"], "ecs-tasks.amazonaws.com")
	const (
		tx             = `{"ForAnyValue:StringEquals":{"dynamodb:EnclosingOperation":["TransactWriteItems"]}}`
		credentialKeys = "SUB:arn:${AWS::Partition}:kms:${AWS::Region}:${AWS::AccountId}:key/*"
		openGitHubApp  = `{"ForAnyValue:StringEquals":{"kms:ResourceAliases":"SUB:alias/${AWS::StackName}-credentials"},"StringEquals":{"kms:EncryptionContext:fluidbox:connection":"github-app"}}`
	)
	for id, want := range map[string]map[string]string{
		"RunnerTaskRole": {
			"secretsmanager:GetSecretValue " + launchSecrets: "null",
			"secretsmanager:DeleteSecret " + launchSecrets:   "null",
		},
		"RunnerExecutionRole": {
			"ecr:BatchCheckLayerAvailability SUB:arn:${AWS::Partition}:ecr:${AWS::Region}:${AWS::AccountId}:repository/${RunnerImageRepository}": "null",
			"ecr:BatchGetImage SUB:arn:${AWS::Partition}:ecr:${AWS::Region}:${AWS::AccountId}:repository/${RunnerImageRepository}":               "null",
			"ecr:GetDownloadUrlForLayer SUB:arn:${AWS::Partition}:ecr:${AWS::Region}:${AWS::AccountId}:repository/${RunnerImageRepository}":      "null",
			"ecr:GetAuthorizationToken *":                    "null",
			"logs:CreateLogStream GETATT:RunnerLogGroup.Arn": "null",
			"logs:PutLogEvents GETATT:RunnerLogGroup.Arn":    "null",
		},
	} {
		if got := grants(t, roleStatements(t, id, roles[id])); !equalMaps(got, want) {
			t.Errorf("%s grants\n%v\nwant\n%v", id, got, want)
		}
	}
	fn := resources(l.doc, "AWS::Serverless::Function")[launchFunction]
	sts, errs := functionStatements(launchFunction, fn)
	for _, err := range errs {
		t.Error(err)
	}
	for _, st := range sts {
		if slices.Contains(asStrings(st.fields["Action"]), "kms:Decrypt") && !opensGitHubAppOnly(launchFunction, st) {
			t.Errorf("%s: kms:Decrypt without %s = %q", st.where, gitHubAppContext, githubapp.SealID)
		}
	}
	checkKeyOpensGitHubAppOnly(t, l, launchFunction)
	want := map[string]string{
		"dynamodb:GetItem GETATT:Table.Arn":            "null",
		"dynamodb:UpdateItem GETATT:Table.Arn":         "null",
		"dynamodb:PutItem GETATT:Table.Arn":            tx,
		"dynamodb:ConditionCheckItem GETATT:Table.Arn": tx,
		"secretsmanager:CreateSecret " + launchSecrets: "null",
		"secretsmanager:DeleteSecret " + launchSecrets: "null",
		"kms:Decrypt " + credentialKeys:                openGitHubApp,
	}
	if got := grants(t, sts); !equalMaps(got, want) {
		t.Errorf("%s grants\n%v\nwant\n%v", launchFunction, got, want)
	}
	if v := dig(props(fn), "Environment", "Variables", "FLUIDBOX_LAUNCH_SECRET_PREFIX"); v != "SUB:${AWS::StackName}/launch/" {
		t.Errorf("LaunchFunction FLUIDBOX_LAUNCH_SECRET_PREFIX = %v, want the path the roles are scoped to", v)
	}
}

// TestLaunchStateMachinePrivileges: the state machine invokes the launch
// function, runs the runner's task definition on the runner's cluster,
// watches and stops tasks of that cluster, keeps the managed rule of .sync,
// and passes the runner's two roles to ECS tasks only.
func TestLaunchStateMachinePrivileges(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	sm := resources(l.doc, "AWS::Serverless::StateMachine")[launchStateMachine]
	sts, errs := functionStatements(launchStateMachine, sm)
	for _, err := range errs {
		t.Error(err)
	}
	task := "SUB:arn:${AWS::Partition}:ecs:${AWS::Region}:${AWS::AccountId}:task/${RunnerCluster}/*"
	rule := "SUB:arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:rule/StepFunctionsGetEventsForECSTaskRule"
	pass := `{"StringEquals":{"iam:PassedToService":"ecs-tasks.amazonaws.com"}}`
	want := map[string]string{
		"lambda:InvokeFunction GETATT:LaunchFunction.Arn": "null",
		"ecs:RunTask REF:RunnerTaskDefinition":            `{"ArnEquals":{"ecs:cluster":"GETATT:RunnerCluster.Arn"}}`,
		"ecs:DescribeTasks " + task:                       "null",
		"ecs:StopTask " + task:                            "null",
		"events:PutTargets " + rule:                       "null",
		"events:PutRule " + rule:                          "null",
		"events:DescribeRule " + rule:                     "null",
		"iam:PassRole GETATT:RunnerTaskRole.Arn":          pass,
		"iam:PassRole GETATT:RunnerExecutionRole.Arn":     pass,
	}
	if got := grants(t, sts); !equalMaps(got, want) {
		t.Errorf("%s grants\n%v\nwant\n%v", launchStateMachine, got, want)
	}
	subs, _ := props(sm)["DefinitionSubstitutions"].(map[string]any)
	wantSubs := map[string]string{
		"LaunchFunctionArn":       "GETATT:LaunchFunction.Arn",
		"RunnerClusterArn":        "GETATT:RunnerCluster.Arn",
		"RunnerTaskDefinitionArn": "REF:RunnerTaskDefinition",
		"RunnerSubnetIds":         "JOIN:[, REF:RunnerSubnetIds]",
		"RunnerSecurityGroupId":   "GETATT:RunnerSecurityGroup.GroupId",
	}
	for k, v := range wantSubs {
		if fmt.Sprint(subs[k]) != v {
			t.Errorf("DefinitionSubstitutions.%s = %v, want %s", k, subs[k], v)
		}
	}
}

// TestLaunchDefinition pins what the launch steps rely on: Start gets the
// run and the execution and may only be retried when Lambda refused it
// unrun; RunTask is .sync on Fargate, without a public IP, times out at
// the start step's task_timeout_seconds, and its one override is the
// secret's name; every failure of Start or RunTask, and the task's stop,
// go to Finish with the error; Finish is retried and fails visibly.
func TestLaunchDefinition(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("launch.asl.json")
	if err != nil {
		t.Fatal(err)
	}
	var sm struct {
		StartAt string
		States  map[string]map[string]any
	}
	if err := json.Unmarshal(raw, &sm); err != nil {
		t.Fatal(err)
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	start := sm.States[sm.StartAt]
	if sm.StartAt != "Start" || start["Resource"] != "arn:aws:states:::lambda:invoke" ||
		js(dig(start, "Parameters")) != `{"FunctionName":"${LaunchFunctionArn}","Payload":{"execution.$":"$$.Execution.Name","session_id.$":"$.detail.session_id","step":"start"}}` {
		t.Errorf("Start = %s", js(start))
	}
	if js(start["Retry"]) == "" || !strings.Contains(js(start["Retry"]), `"ErrorEquals":["Lambda.TooManyRequestsException"]`) || len(start["Retry"].([]any)) != 1 {
		t.Errorf("Start.Retry = %s, want only Lambda's refusal (a start that ran may have launched)", js(start["Retry"]))
	}
	catchesTo := func(name string) string {
		c, _ := sm.States[name]["Catch"].([]any)
		if len(c) != 1 {
			return ""
		}
		m := c[0].(map[string]any)
		if js(m["ErrorEquals"]) != `["States.ALL"]` || m["ResultPath"] != "$.error" {
			return ""
		}
		return m["Next"].(string)
	}
	if catchesTo("Start") != "Finish" || catchesTo("RunTask") != "Finish" {
		t.Errorf("Start catches to %q, RunTask to %q; want both to Finish with $.error", catchesTo("Start"), catchesTo("RunTask"))
	}
	run := sm.States["RunTask"]
	if run["Resource"] != "arn:aws:states:::ecs:runTask.sync" || run["TimeoutSecondsPath"] != "$.launch.result.task_timeout_seconds" || run["Next"] != "TaskStopped" {
		t.Errorf("RunTask = %s", js(run))
	}
	p, _ := run["Parameters"].(map[string]any)
	if p["LaunchType"] != "FARGATE" || p["Cluster"] != "${RunnerClusterArn}" || p["TaskDefinition"] != "${RunnerTaskDefinitionArn}" ||
		js(p["NetworkConfiguration"]) != `{"AwsvpcConfiguration":{"AssignPublicIp":"DISABLED","SecurityGroups":["${RunnerSecurityGroupId}"],"Subnets.$":"States.StringSplit('${RunnerSubnetIds}', ',')"}}` {
		t.Errorf("RunTask.Parameters = %s", js(p))
	}
	if js(p["Overrides"]) != `{"ContainerOverrides":[{"Environment":[{"Name":"FLUIDBOX_LAUNCH_SECRET","Value.$":"$.launch.result.secret"}],"Name":"runner"}]}` {
		t.Errorf("RunTask overrides = %s, want only the secret's name", js(p["Overrides"]))
	}
	for k := range p {
		if !slices.Contains([]string{"LaunchType", "Cluster", "TaskDefinition", "NetworkConfiguration", "Overrides"}, k) {
			t.Errorf("RunTask.Parameters.%s: not held by this test", k)
		}
	}
	if js(sm.States["TaskStopped"]) != `{"Next":"Finish","Result":{"Error":""},"ResultPath":"$.error","Type":"Pass"}` {
		t.Errorf("TaskStopped = %s", js(sm.States["TaskStopped"]))
	}
	fin := sm.States["Finish"]
	if js(fin["Parameters"]) != `{"FunctionName":"${LaunchFunctionArn}","Payload":{"error.$":"$.error.Error","execution.$":"$$.Execution.Name","session_id.$":"$.detail.session_id","step":"finish"}}` ||
		!strings.Contains(js(fin["Retry"]), `"ErrorEquals":["States.ALL"]`) || sm.States[fin["Next"].(string)]["Type"] != "Choice" {
		t.Errorf("Finish = %s", js(fin))
	}
	if c, _ := fin["Catch"].([]any); len(c) != 1 || sm.States[c[0].(map[string]any)["Next"].(string)]["Type"] != "Fail" {
		t.Errorf("Finish.Catch = %s, want a Fail state", js(fin["Catch"]))
	}
	if strings.Contains(string(raw), "credential\"") || strings.Contains(strings.ToLower(string(raw)), "fbx_") {
		t.Error("the definition handles a credential: only the secret's name may pass through an execution")
	}
}

// TestRunnerTaskDefinition: Fargate on arm64 in awsvpc, the image pinned
// by digest, the runner's two roles, and an environment of URLs and the
// region only (the launch secret's name comes as the override; nothing
// secret is here).
func TestRunnerTaskDefinition(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	p := props(resources(l.doc, "AWS::ECS::TaskDefinition")["RunnerTaskDefinition"])
	if !slices.Equal(asStrings(p["RequiresCompatibilities"]), []string{"FARGATE"}) || p["NetworkMode"] != "awsvpc" ||
		dig(p, "RuntimePlatform", "CpuArchitecture") != "ARM64" || dig(p, "RuntimePlatform", "OperatingSystemFamily") != "LINUX" ||
		p["TaskRoleArn"] != "GETATT:RunnerTaskRole.Arn" || p["ExecutionRoleArn"] != "GETATT:RunnerExecutionRole.Arn" {
		t.Errorf("RunnerTaskDefinition = %v", p)
	}
	cs := asList(p["ContainerDefinitions"])
	if len(cs) != 1 || cs[0]["Name"] != "runner" {
		t.Fatalf("ContainerDefinitions = %v, want one, named runner (the state machine's override names it)", cs)
	}
	c := cs[0]
	if img, _ := c["Image"].(string); !strings.HasSuffix(img, "/${RunnerImageRepository}@${RunnerImageDigest}") {
		t.Errorf("Image = %v, want the repository at the digest", c["Image"])
	}
	var env []string
	for _, e := range asList(c["Environment"]) {
		env = append(env, fmt.Sprint(e["Name"]))
	}
	if !slices.Equal(env, []string{"FLUIDBOX_URL", "FLUIDBOX_MODEL_URL", "AWS_REGION"}) || c["Secrets"] != nil {
		t.Errorf("Environment = %v, Secrets = %v; want the two URLs and the region only", env, c["Secrets"])
	}
	if dig(c, "LogConfiguration", "LogDriver") != "awslogs" || dig(c, "LogConfiguration", "Options", "awslogs-group") != "REF:RunnerLogGroup" {
		t.Errorf("LogConfiguration = %v", c["LogConfiguration"])
	}
}

// TestRunnerSecurityGroup: no ingress, and egress is HTTPS to the two
// prefix lists (the control plane's path, the VPC endpoints) and nothing
// else: no CIDR, no other port or protocol, no default allow-all (a group
// whose egress is given has only what is given).
func TestRunnerSecurityGroup(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	p := props(resources(l.doc, "AWS::EC2::SecurityGroup")["RunnerSecurityGroup"])
	if p["SecurityGroupIngress"] != nil {
		t.Errorf("RunnerSecurityGroup has ingress %v", p["SecurityGroupIngress"])
	}
	if p["VpcId"] != "REF:RunnerVpcId" {
		t.Errorf("VpcId = %v", p["VpcId"])
	}
	var got []string
	for _, e := range asList(p["SecurityGroupEgress"]) {
		for k := range e {
			if !slices.Contains([]string{"Description", "IpProtocol", "FromPort", "ToPort", "DestinationPrefixListId"}, k) {
				t.Errorf("egress rule %v: %s is not held by this test (a CIDR or a group would widen it)", e, k)
			}
		}
		got = append(got, fmt.Sprintf("%v %v-%v %v", e["IpProtocol"], e["FromPort"], e["ToPort"], e["DestinationPrefixListId"]))
	}
	want := []string{"tcp 443-443 REF:RunnerControlPlanePrefixListId", "tcp 443-443 REF:RunnerServiceEndpointsPrefixListId"}
	if !slices.Equal(got, want) {
		t.Errorf("egress = %v, want %v", got, want)
	}
	for _, r := range resources(l.doc, "AWS::EC2::SecurityGroupEgress") {
		if props(r)["GroupId"] == "GETATT:RunnerSecurityGroup.GroupId" || props(r)["GroupId"] == "REF:RunnerSecurityGroup" {
			t.Errorf("a separate egress rule widens RunnerSecurityGroup: %v", props(r))
		}
	}
}
