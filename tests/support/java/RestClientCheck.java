import java.util.List;
import java.util.Map;

import org.lance.namespace.client.apache.ApiClient;
import org.lance.namespace.client.apache.ApiException;
import org.lance.namespace.client.apache.api.NamespaceApi;
import org.lance.namespace.client.apache.api.TableApi;
import org.lance.namespace.model.CreateNamespaceRequest;
import org.lance.namespace.model.DeclareTableRequest;
import org.lance.namespace.model.DeregisterTableRequest;
import org.lance.namespace.model.DescribeNamespaceRequest;
import org.lance.namespace.model.DescribeTableRequest;
import org.lance.namespace.model.DropNamespaceRequest;
import org.lance.namespace.model.NamespaceExistsRequest;
import org.lance.namespace.model.TableExistsRequest;

/**
 * The core operations through Lance's Java REST client (lance-namespace-apache-client):
 * java RestClientCheck URL TOKEN DB. Prints one line per check; exits 1 on the first failure.
 */
public class RestClientCheck {
  static void check(boolean ok, String what) {
    System.out.println((ok ? "ok " : "FAILED ") + what);
    if (!ok) {
      System.exit(1);
    }
  }

  /** The spec's code in an error body, or -1. */
  static int codeOf(ApiException error) {
    String body = error.getResponseBody();
    java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"code\"\\s*:\\s*(\\d+)").matcher(body == null ? "" : body);
    return m.find() ? Integer.parseInt(m.group(1)) : -1;
  }

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String token = args[1];
    String db = args[2];
    String table = db + "$orders";

    ApiClient anonymous = new ApiClient();
    anonymous.setBasePath(url);
    try {
      new NamespaceApi(anonymous).listNamespaces("$", "$", null, null);
      check(false, "a request without the token is refused");
    } catch (ApiException error) {
      check(error.getCode() == 401 && codeOf(error) == 16, "401 / code 16 without the token");
    }

    ApiClient client = new ApiClient();
    client.setBasePath(url);
    client.addDefaultHeader("Authorization", "Bearer " + token);
    NamespaceApi namespaces = new NamespaceApi(client);
    TableApi tables = new TableApi(client);

    namespaces.createNamespace(db, new CreateNamespaceRequest().properties(Map.of("team", "java")), "$");
    check(true, "create_namespace " + db);
    try {
      namespaces.createNamespace(db, new CreateNamespaceRequest(), "$");
      check(false, "creating it again fails");
    } catch (ApiException error) {
      check(error.getCode() == 409 && codeOf(error) == 2, "409 / code 2 creating it again");
    }
    namespaces.namespaceExists(db, new NamespaceExistsRequest(), "$");
    check(true, "namespace_exists");
    String team = namespaces.describeNamespace(db, new DescribeNamespaceRequest(), "$").getProperties().get("team");
    check("java".equals(team), "describe_namespace properties");
    List<String> listed = namespaces.listNamespaces("$", "$", null, null).getNamespaces().stream().toList();
    check(listed.contains(db), "list_namespaces " + listed);

    String location = tables.declareTable(table, new DeclareTableRequest(), "$").getLocation();
    check(location != null && location.endsWith("orders.lance"), "declare_table at " + location);
    String described = tables.describeTable(table, new DescribeTableRequest(), "$", null, null, null).getLocation();
    check(location.equals(described), "describe_table location");
    tables.tableExists(table, new TableExistsRequest(), "$");
    check(true, "table_exists");
    List<String> names = namespaces.listTables(db, "$", null, null, null).getTables().stream().toList();
    check(names.equals(List.of("orders")), "list_tables " + names);
    try {
      tables.describeTable(db + "$missing", new DescribeTableRequest(), "$", null, null, null);
      check(false, "describing a missing table fails");
    } catch (ApiException error) {
      check(error.getCode() == 404 && codeOf(error) == 4, "404 / code 4 for a missing table");
    }
    try {
      namespaces.dropNamespace(db, new DropNamespaceRequest(), "$");
      check(false, "dropping a namespace with a table fails");
    } catch (ApiException error) {
      check(error.getCode() == 409 && codeOf(error) == 3, "409 / code 3 dropping a non-empty namespace");
    }
    tables.deregisterTable(table, new DeregisterTableRequest(), "$");
    check(true, "deregister_table");
    namespaces.dropNamespace(db, new DropNamespaceRequest(), "$");
    check(true, "drop_namespace");
    System.out.println("all checks passed");
  }
}
