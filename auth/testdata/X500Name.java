import javax.security.auth.x500.X500Principal;
import java.util.Base64;
public class X500Name {
  public static void main(String[] a) throws Exception {
    java.io.BufferedReader r = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
    String line;
    while ((line = r.readLine()) != null) {
      if (line.isEmpty()) continue;
      System.out.println(new X500Principal(Base64.getDecoder().decode(line)).getName());
    }
  }
}
